import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { TypeOrmModule } from '@nestjs/typeorm';
import { HealthModule, loggingModule, postgresOptions, validatedConfig } from '@app/platform';
import { FulfillmentConfig, fulfillmentConfig } from './config';
import { FulfillmentConsumer } from './shipments/fulfillment-consumer.service';

@Module({
  imports: [
    validatedConfig(fulfillmentConfig),
    loggingModule('fulfillment'),
    TypeOrmModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService<FulfillmentConfig, true>) =>
        postgresOptions({
          url: config.get('FULFILLMENT_DATABASE_URL', { infer: true }),
          applicationName: 'fulfillment',
          poolSize: config.get('DATABASE_POOL_SIZE', { infer: true }),
          statementTimeoutMs: 30_000,
        }),
    }),
    HealthModule.register({ database: 'fulfillment', kafka: true }),
  ],
  providers: [FulfillmentConsumer],
})
export class AppModule {}
