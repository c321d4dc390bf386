import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { TypeOrmModule } from '@nestjs/typeorm';
import { HealthModule, loggingModule, postgresOptions, validatedConfig } from '@app/platform';
import { WebhookReceiverConfig, webhookReceiverConfig } from './config';
import { OrderWebhooksHttpController } from './webhooks/order-webhooks.http.controller';
import { ReceiveOrderWebhookService } from './webhooks/receive-order-webhook.service';
import { WebhookVerifier } from './webhooks/webhook-verifier';

@Module({
  imports: [
    validatedConfig(webhookReceiverConfig),
    loggingModule('webhook-receiver'),
    TypeOrmModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService<WebhookReceiverConfig, true>) =>
        postgresOptions({
          url: config.get('WEBHOOK_RECEIVER_DATABASE_URL', { infer: true }),
          applicationName: 'webhook-receiver',
          poolSize: config.get('DATABASE_POOL_SIZE', { infer: true }),
          // The sender is waiting (and times out): a stuck statement or duplicate becomes a 503 to retry.
          lockTimeoutMs: 3_000,
          statementTimeoutMs: 4_000,
        }),
    }),
    HealthModule.register({ database: 'webhook_receiver' }),
  ],
  controllers: [OrderWebhooksHttpController],
  providers: [
    ReceiveOrderWebhookService,
    {
      provide: WebhookVerifier,
      inject: [ConfigService],
      useFactory: (config: ConfigService<WebhookReceiverConfig, true>) =>
        new WebhookVerifier(config.get('WEBHOOK_RECEIVER_SECRETS', { infer: true })),
    },
  ],
})
export class AppModule {}
