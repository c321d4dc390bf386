import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { TypeOrmModule } from '@nestjs/typeorm';
import { HealthModule, loggingModule, postgresOptions, validatedConfig } from '@app/platform';
import { outboxRelayConfig } from './config';

@Module({
  imports: [
    validatedConfig(outboxRelayConfig),
    loggingModule('outbox-relay'),
    TypeOrmModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService) =>
        postgresOptions({
          url: config.getOrThrow('ORDERS_DATABASE_URL'),
          applicationName: 'outbox-relay',
          poolSize: config.getOrThrow('DATABASE_POOL_SIZE'),
        }),
    }),
    HealthModule.register({ database: 'orders', kafka: true }),
  ],
})
export class AppModule {}
