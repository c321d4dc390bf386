import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { TypeOrmModule } from '@nestjs/typeorm';
import { HealthModule, loggingModule, postgresOptions, validatedConfig } from '@app/platform';
import { fulfillmentConfig } from './config';

@Module({
  imports: [
    validatedConfig(fulfillmentConfig),
    loggingModule('fulfillment'),
    TypeOrmModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService) =>
        postgresOptions({
          url: config.getOrThrow('FULFILLMENT_DATABASE_URL'),
          applicationName: 'fulfillment',
          poolSize: config.getOrThrow('DATABASE_POOL_SIZE'),
        }),
    }),
    HealthModule.register({ database: 'fulfillment', kafka: true }),
  ],
})
export class AppModule {}
