import { z } from 'zod';
import { envFields } from '@app/platform';

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const notifierConfig = z
  .object({
    NODE_ENV: envFields.nodeEnv,
    LOG_LEVEL: envFields.logLevel,
    HOST: envFields.host,
    NOTIFIER_PORT: envFields.port(3003),
    NOTIFIER_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/notifier'),
    DATABASE_POOL_SIZE: envFields.poolSize,
    KAFKA_BROKERS: envFields.kafkaBrokers,
    /**
     * Where each OrderPlaced is POSTed. The default is a local placeholder nothing listens on: until
     * it is pointed at a real receiver, deliveries fail, are retried and end on the dead-letter topic.
     */
    WEBHOOK_URL: z
      .string()
      .default('http://127.0.0.1:3099/webhooks/orders')
      .refine((value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol), {
        message: 'must be an http:// or https:// URL',
      }),
    /** One POST's bound; a timeout counts as a failed attempt (retried). */
    WEBHOOK_TIMEOUT_MS: int(100, 25_000).default(5_000),
    /** Attempts before a failing delivery goes to the dead-letter topic (database outages are not counted). */
    NOTIFIER_MAX_ATTEMPTS: int(1, 100).default(8),
    NOTIFIER_RETRY_MIN_MS: int(1, 60_000).default(200),
    NOTIFIER_RETRY_MAX_MS: int(1, 600_000).default(30_000),
    /** How long message-ids are remembered. Outbox replays must not reach further back (ops refuses). */
    INBOX_RETENTION_SECONDS: int(60, 365 * 24 * 3600).default(14 * 24 * 3600),
    INBOX_SWEEP_INTERVAL_SECONDS: int(0, 24 * 3600).default(3600),
    /** How long Kafka waits for a silent consumer before rebalancing its partitions (broker minimum 6000). */
    KAFKA_SESSION_TIMEOUT_MS: int(6_000, 300_000).default(30_000),
  })
  .refine((c) => c.NOTIFIER_RETRY_MIN_MS <= c.NOTIFIER_RETRY_MAX_MS, {
    path: ['NOTIFIER_RETRY_MIN_MS'],
    message: 'must not exceed NOTIFIER_RETRY_MAX_MS',
  })
  // kafkajs heartbeats between messages only: one POST must end well inside the session timeout.
  .refine((c) => c.WEBHOOK_TIMEOUT_MS < c.KAFKA_SESSION_TIMEOUT_MS, {
    path: ['WEBHOOK_TIMEOUT_MS'],
    message: 'must be less than KAFKA_SESSION_TIMEOUT_MS',
  });

export type NotifierConfig = z.infer<typeof notifierConfig>;
