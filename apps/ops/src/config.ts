import { z } from 'zod';
import { envFields } from '@app/platform';

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const opsConfig = z.object({
  NODE_ENV: envFields.nodeEnv,
  ORDERS_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/orders'),
  /** Each consumer's own database: its inbox, dead letters and declared retention live there. */
  FULFILLMENT_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/fulfillment'),
  NOTIFIER_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/notifier'),
  /** The reference webhook receiver's database (apps/webhook-receiver): only `db:migrate` uses it. */
  WEBHOOK_RECEIVER_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/webhook_receiver'),
  KAFKA_BROKERS: envFields.kafkaBrokers,
  /** Same value as the relay's: partitions of a topic ops has to (re)create before a replay. */
  KAFKA_TOPIC_PARTITIONS: int(1, 1000).default(6),
  /** Same value as the relay's: how long published outbox rows are kept (outbox:cleanup, audit). */
  OUTBOX_RETENTION_SECONDS: int(60, 365 * 24 * 3600).default(7 * 24 * 3600),
  /** Same values as the relay's: outbox:status names unowned shards and relays silent for 3 heartbeats. */
  RELAY_SHARDS: int(1, 1024).default(16),
  RELAY_HEARTBEAT_MS: int(100, 60_000).default(2_000),
});

export type OpsConfig = z.infer<typeof opsConfig>;
