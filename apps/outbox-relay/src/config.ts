import { z } from 'zod';
import { envFields } from '@app/platform';

export const outboxRelayConfig = z.object({
  NODE_ENV: envFields.nodeEnv,
  LOG_LEVEL: envFields.logLevel,
  HOST: envFields.host,
  OUTBOX_RELAY_PORT: envFields.port(3001),
  ORDERS_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/orders'),
  DATABASE_POOL_SIZE: envFields.poolSize,
  KAFKA_BROKERS: envFields.kafkaBrokers,
});

export type OutboxRelayConfig = z.infer<typeof outboxRelayConfig>;
