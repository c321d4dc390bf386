import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { TypeOrmModule } from '@nestjs/typeorm';
import { orderEventContract, Topics } from '@app/contracts';
import { inboxConsumer } from '@app/inbox';
import { HealthModule, loggingModule, validatedConfig } from '@app/platform';
import { NotifierConfig, notifierConfig } from './config';
import { notifierDatabase } from './database';
import { DeliveryRecorder } from './webhooks/delivery-recorder';
import { WebhookDispatcher } from './webhooks/webhook-dispatcher.service';

@Module({
  imports: [
    validatedConfig(notifierConfig),
    loggingModule('notifier'),
    TypeOrmModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService<NotifierConfig, true>) =>
        notifierDatabase({
          url: config.get('NOTIFIER_DATABASE_URL', { infer: true }),
          poolSize: config.get('DATABASE_POOL_SIZE', { infer: true }),
        }),
    }),
    HealthModule.register({ database: 'notifier', kafka: true }),
  ],
  // Order events recorded as webhook deliveries, once per message-id (docs/notifier.md); the dispatcher POSTs them.
  providers: [
    WebhookDispatcher,
    ...inboxConsumer({
      name: 'notifier',
      topics: [Topics.orderEvents],
      contract: orderEventContract,
      handler: DeliveryRecorder,
      deadLetterTopic: Topics.deadLetters,
    }),
  ],
})
export class AppModule {}
