import { z } from 'zod';
import { envFields } from '@app/platform';

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const fulfillmentConfig = z
  .object({
    NODE_ENV: envFields.nodeEnv,
    LOG_LEVEL: envFields.logLevel,
    HOST: envFields.host,
    FULFILLMENT_PORT: envFields.port(3002),
    /** /metrics and /docs are served here, not on the app's port (firewall it like any internal port). */
    MANAGEMENT_PORT: envFields.port(3102),
    FULFILLMENT_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/fulfillment'),
    DATABASE_POOL_SIZE: envFields.poolSize,
    KAFKA_BROKERS: envFields.kafkaBrokers,
    /** How long message-ids are remembered. Outbox replays must not reach further back (ops refuses). */
    INBOX_RETENTION_SECONDS: int(60, 365 * 24 * 3600).default(14 * 24 * 3600),
    INBOX_SWEEP_INTERVAL_SECONDS: int(0, 24 * 3600).default(3600),
    /** Attempts before a failing message goes to the dead-letter topic (database outages are not counted). */
    FULFILLMENT_MAX_ATTEMPTS: int(1, 100).default(5),
    FULFILLMENT_RETRY_MIN_MS: int(1, 60_000).default(200),
    FULFILLMENT_RETRY_MAX_MS: int(1, 600_000).default(10_000),
    /** How long Kafka waits for a silent consumer before rebalancing its partitions (broker minimum 6000). */
    KAFKA_SESSION_TIMEOUT_MS: int(6_000, 300_000).default(30_000),
    /** Test-only: SIGKILL itself after a database commit, before the offset commit. Accepted only with NODE_ENV=test. */
    CRASH_AFTER_DATABASE_COMMIT: envFields.flag(false),
  })
  .refine((c) => !c.CRASH_AFTER_DATABASE_COMMIT || c.NODE_ENV === 'test', {
    path: ['CRASH_AFTER_DATABASE_COMMIT'],
    message: 'is a test-only switch (it crash-loops the consumer on every message): it needs NODE_ENV=test',
  });

export type FulfillmentConfig = z.infer<typeof fulfillmentConfig>;
