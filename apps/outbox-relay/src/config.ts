import { z } from 'zod';
import { envFields } from '@app/platform';

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const outboxRelayConfig = z
  .object({
    NODE_ENV: envFields.nodeEnv,
    LOG_LEVEL: envFields.logLevel,
    SHUTDOWN_TIMEOUT_SECONDS: envFields.shutdownTimeoutSeconds,
    ...envFields.httpTimeouts,
    HOST: envFields.host,
    OUTBOX_RELAY_PORT: envFields.port(3001),
    /** /metrics and /docs are served here, not on the app's port (firewall it like any internal port). */
    MANAGEMENT_PORT: envFields.port(3101),
    ORDERS_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/orders'),
    DATABASE_POOL_SIZE: envFields.poolSize,
    /**
     * PostgreSQL ends a session of the relay that sits this long inside a transaction with nothing sent
     * (a crashed or stuck relay must not hold row locks forever). The relay itself gives back a batch it
     * claimed ahead once Kafka has been slow for a third of this, so a slow broker never costs it its session.
     */
    DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: int(1_000, 3_600_000).default(60_000),
    KAFKA_BROKERS: envFields.kafkaBrokers,
    /** Partitions of each topic the relay creates at start (existing topics are left as they are). */
    KAFKA_TOPIC_PARTITIONS: int(1, 1000).default(6),
    /** Keys are split into this many shards; one relay instance owns a shard at a time. Same value on every instance. */
    RELAY_SHARDS: int(1, 1024).default(16),
    RELAY_BATCH_SIZE: int(1, 10_000).default(500),
    /** Fallback poll when no NOTIFY arrives. */
    RELAY_POLL_INTERVAL_MS: int(10, 60_000).default(1_000),
    RELAY_BACKOFF_MIN_MS: int(10, 60_000).default(250),
    RELAY_BACKOFF_MAX_MS: int(100, 600_000).default(30_000),
    /** How often an instance renews its heartbeat and rebalances shards. Instances silent for 3x this are gone. */
    RELAY_HEARTBEAT_MS: int(100, 60_000).default(2_000),
    /** Published rows are kept this long (for operator replays), then deleted in batches. */
    OUTBOX_RETENTION_SECONDS: int(60, 365 * 24 * 3600).default(7 * 24 * 3600),
    OUTBOX_CLEANUP_INTERVAL_SECONDS: int(0, 24 * 3600).default(300),
  })
  .refine((c) => c.RELAY_BACKOFF_MIN_MS <= c.RELAY_BACKOFF_MAX_MS, {
    path: ['RELAY_BACKOFF_MIN_MS'],
    message: 'must not exceed RELAY_BACKOFF_MAX_MS',
  });

export type OutboxRelayConfig = z.infer<typeof outboxRelayConfig>;
