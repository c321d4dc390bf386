import { runHttpApp } from '@app/platform';
import { AppModule } from './app.module';
import { webhookReceiverConfig } from './config';
import { webhookReceiverProblems } from './webhooks/webhook-problems';

void runHttpApp({
  name: 'webhook-receiver',
  module: AppModule,
  schema: webhookReceiverConfig,
  listen: (config) => ({ host: config.HOST, port: config.WEBHOOK_RECEIVER_PORT, managementPort: config.MANAGEMENT_PORT }),
  problems: [webhookReceiverProblems],
  describe: (doc) =>
    doc.setDescription(
      'Reference receiver of the order webhooks the notifier sends (Standard Webhooks): verifies each signature, ' +
        'stores each webhook-id once and answers 204. Errors are RFC 9457 application/problem+json.',
    ),
});
