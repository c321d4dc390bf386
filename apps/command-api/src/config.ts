import { z } from 'zod';
import { envFields } from '@app/platform';

export const commandApiConfig = z.object({
  NODE_ENV: envFields.nodeEnv,
  LOG_LEVEL: envFields.logLevel,
  HOST: envFields.host,
  COMMAND_API_PORT: envFields.port(3000),
  ORDERS_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/orders'),
  DATABASE_POOL_SIZE: envFields.poolSize,
  KAFKA_BROKERS: envFields.kafkaBrokers,
  /** The API never talks to Kafka (the outbox does); behind a load balancer you may not want a broker outage to drain it. */
  READINESS_REQUIRES_KAFKA: envFields.flag(true),
});

export type CommandApiConfig = z.infer<typeof commandApiConfig>;
