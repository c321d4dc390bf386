import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { TypeOrmModule } from '@nestjs/typeorm';
import { orderEventContract, Topics } from '@app/contracts';
import { inboxConsumer } from '@app/inbox';
import { HealthModule, loggingModule, postgresOptions, validatedConfig } from '@app/platform';
import { FulfillmentConfig, fulfillmentConfig } from './config';
import { ShipmentsHandler } from './shipments/fulfillment.handler';

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
          // The inbox transaction writes BEGIN with its first statement (inTransaction).
          pipeline: true,
        }),
    }),
    HealthModule.register({ database: 'fulfillment', kafka: true }),
  ],
  // Order events into shipments, once per message-id; forgets ids after INBOX_RETENTION_SECONDS.
  providers: [
    ...inboxConsumer({
      name: 'fulfillment',
      topics: [Topics.orderEvents],
      contract: orderEventContract,
      handler: ShipmentsHandler,
      deadLetterTopic: Topics.deadLetters,
    }),
  ],
})
export class AppModule {}
