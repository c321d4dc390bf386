import { runHttpApp } from '@app/platform';
import { AppModule } from './app.module';
import { fulfillmentConfig } from './config';

void runHttpApp({
  name: 'fulfillment',
  module: AppModule,
  schema: fulfillmentConfig,
  listen: (config) => ({ host: config.HOST, port: config.FULFILLMENT_PORT, managementPort: config.MANAGEMENT_PORT }),
  describe: (doc) => doc.setDescription('Consumes order events into its own database, once per message-id.'),
});
