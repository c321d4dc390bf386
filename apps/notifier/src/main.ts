import { runHttpApp } from '@app/platform';
import { AppModule } from './app.module';
import { notifierConfig } from './config';

void runHttpApp({
  name: 'notifier',
  module: AppModule,
  schema: notifierConfig,
  listen: (config) => ({ host: config.HOST, port: config.NOTIFIER_PORT, managementPort: config.MANAGEMENT_PORT }),
  describe: (doc) =>
    doc.setDescription(
      'Records a webhook delivery per order event (OrderPlaced, OrderCancelled) and POSTs it, signed per Standard Webhooks, retried on a schedule; webhook-id is the message-id.',
    ),
});
