import { runHttpApp } from '@app/platform';
import { AppModule } from './app.module';
import { commandApiConfig } from './config';
import { commandApiProblems, documentedProblemTypes } from './http/problem-catalog';

void runHttpApp({
  name: 'command-api',
  module: AppModule,
  schema: commandApiConfig,
  listen: (config) => ({ host: config.HOST, port: config.COMMAND_API_PORT, managementPort: config.MANAGEMENT_PORT }),
  problems: [commandApiProblems],
  describe: (doc) =>
    doc
      .setDescription(
        'Idempotent order commands. Each POST takes an Idempotency-Key: one logical action within ' +
          '(your tenant, the operation, the key) and the retention window (default 24 h, see Idempotency-Expires). ' +
          'Errors are RFC 9457 application/problem+json. Every body is a JSON object of at most 16 KiB, nested at ' +
          'most 32 levels, whose strings (values and field names) are valid Unicode text without NUL characters; ' +
          'anything else is a 400 that stores nothing.',
      )
      .addExtension('x-problem-types', documentedProblemTypes())
      .addBearerAuth({
        type: 'http',
        scheme: 'bearer',
        description: 'An API key from `npm run ops -- clients:create --tenant <id>` (not a JWT).',
      }),
});
