import { runHttpApp } from '@app/platform';
import { AppModule } from './app.module';
import { notifierConfig } from './config';

void runHttpApp({
  name: 'notifier',
  module: AppModule,
  schema: notifierConfig,
  listen: (config) => ({ host: config.HOST, port: config.NOTIFIER_PORT }),
  describe: (doc) =>
    doc.setDescription('POSTs a webhook per OrderPlaced, keyed by its message-id (Idempotency-Key), and records each delivery once.'),
});
