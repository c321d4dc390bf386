import { runHttpApp } from '@app/platform';
import { AppModule } from './app.module';
import { outboxRelayConfig } from './config';

void runHttpApp({
  name: 'outbox-relay',
  module: AppModule,
  schema: outboxRelayConfig,
  listen: (config) => ({ host: config.HOST, port: config.OUTBOX_RELAY_PORT, managementPort: config.MANAGEMENT_PORT }),
  describe: (doc) => doc.setDescription('Publishes committed outbox rows to Kafka.'),
});
