import { runHttpApp } from '@app/platform';
import { AppModule } from './app.module';
import { commandApiConfig } from './config';

void runHttpApp({
  name: 'command-api',
  module: AppModule,
  schema: commandApiConfig,
  listen: (config) => ({ host: config.HOST, port: config.COMMAND_API_PORT }),
  describe: (doc) => doc.setDescription('Idempotent order commands. See README for the idempotency contract.'),
});
