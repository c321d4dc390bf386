import { z } from 'zod';
import { envFields } from '@app/platform';

export const fulfillmentConfig = z.object({
  NODE_ENV: envFields.nodeEnv,
  LOG_LEVEL: envFields.logLevel,
  HOST: envFields.host,
  FULFILLMENT_PORT: envFields.port(3002),
  FULFILLMENT_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/fulfillment'),
  DATABASE_POOL_SIZE: envFields.poolSize,
  KAFKA_BROKERS: envFields.kafkaBrokers,
});

export type FulfillmentConfig = z.infer<typeof fulfillmentConfig>;
