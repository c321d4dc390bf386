import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { TypeOrmModule } from '@nestjs/typeorm';
import { HealthModule, loggingModule, postgresOptions, validatedConfig } from '@app/platform';
import { OutboxRelayConfig, outboxRelayConfig } from './config';
import { RelayModule } from './relay/relay.module';

@Module({
  imports: [
    validatedConfig(outboxRelayConfig),
    loggingModule('outbox-relay'),
    TypeOrmModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService<OutboxRelayConfig, true>) =>
        postgresOptions({
          url: config.get('ORDERS_DATABASE_URL', { infer: true }),
          applicationName: 'outbox-relay',
          poolSize: config.get('DATABASE_POOL_SIZE', { infer: true }),
          statementTimeoutMs: 30_000,
          idleInTransactionTimeoutMs: config.get('DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS', { infer: true }),
          // The relay's loop writes BEGIN, the floor's look and the claim at once, and the mark with COMMIT.
          pipeline: true,
        }),
    }),
    HealthModule.register({ database: 'orders', kafka: true }),
    RelayModule,
  ],
})
export class AppModule {}
