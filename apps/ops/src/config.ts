import { z } from 'zod';
import { envFields } from '@app/platform';

export const opsConfig = z.object({
  NODE_ENV: envFields.nodeEnv,
  ORDERS_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/orders'),
  FULFILLMENT_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/fulfillment'),
  NOTIFIER_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/notifier'),
  KAFKA_BROKERS: envFields.kafkaBrokers,
});

export type OpsConfig = z.infer<typeof opsConfig>;
