import proxyaddr from 'proxy-addr';
import { z } from 'zod';
import { envFields } from '@app/platform';

const retention = () =>
  z.coerce
    .number()
    .int()
    .min(1)
    .max(365 * 24 * 3600);
const DAY = 24 * 3600;
/** How long after its expiry a receipt still refuses its key (0: not at all, the key is then a new request). */
const tombstone = () =>
  z.coerce
    .number()
    .int()
    .min(0)
    .max(365 * DAY)
    .default(0);

export const commandApiConfig = z
  .object({
    NODE_ENV: envFields.nodeEnv,
    LOG_LEVEL: envFields.logLevel,
    SHUTDOWN_TIMEOUT_SECONDS: envFields.shutdownTimeoutSeconds,
    ...envFields.httpTimeouts,
    HOST: envFields.host,
    COMMAND_API_PORT: envFields.port(3000),
    /** /metrics and /docs are served here, not on the public port (firewall it like any internal port). */
    MANAGEMENT_PORT: envFields.port(3100),
    ORDERS_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/orders'),
    DATABASE_POOL_SIZE: envFields.poolSize,
    /**
     * Connections of the pool that a command decided in one statement (an order) shares with the others
     * decided at the same time, pipelined (StatementLanes, docs/performance.md): 0 borrows one per statement.
     * By default 2, or DATABASE_POOL_SIZE if smaller.
     */
    DATABASE_STATEMENT_LANES: z.coerce.number().int().min(0).max(200).optional(),
    DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
    KAFKA_BROKERS: envFields.kafkaBrokers,
    /** The API never talks to Kafka (the outbox does); behind a load balancer you may not want a broker outage to drain it. */
    READINESS_REQUIRES_KAFKA: envFields.flag(true),
    /** Recorded on every receipt: another region's deployment has its own store and scopes. */
    SERVICE_REGION: z
      .string()
      .regex(/^[a-z0-9-]{1,32}$/, 'must be 1-32 of a-z, 0-9, -')
      .default('local'),
    IDEMPOTENCY_RETENTION_SECONDS: retention().default(DAY),
    /** Per-operation overrides of IDEMPOTENCY_RETENTION_SECONDS. */
    IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CREATE: retention().optional(),
    IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CANCEL: retention().optional(),
    /**
     * Per operation: keep an expired receipt as a tombstone this many seconds longer, refusing a very late
     * retry of its key (422 /problems/idempotency-key-expired) instead of running it as a new request. 0: off.
     */
    IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CREATE: tombstone(),
    IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CANCEL: tombstone(),
    /** How long a 404 for an order that does not exist is remembered (the same answer whenever computed again). */
    IDEMPOTENCY_RETENTION_SECONDS_NOT_FOUND: retention().default(60),
    /** How long a duplicate waits for the request holding its key before it gets 409 + Retry-After. */
    IDEMPOTENCY_LOCK_TIMEOUT_MS: z.coerce.number().int().min(1).max(60_000).default(5_000),
    /**
     * How long a committed receipt may be replayed from memory (0: never), saving a retry its round trips.
     * Never past the receipt's expiry; this bounds how long a receipt changed by hand may go unseen.
     */
    IDEMPOTENCY_REPLAY_CACHE_SECONDS: z.coerce.number().int().min(0).max(3600).default(60),
    /** Receipts one API process keeps for IDEMPOTENCY_REPLAY_CACHE_SECONDS, the most recently used. */
    IDEMPOTENCY_REPLAY_CACHE_ENTRIES: z.coerce.number().int().min(1).max(10_000_000).default(10_000),
    /** 0 turns the in-process sweeper off (use `npm run ops -- receipts:sweep` from a scheduler instead). */
    RECEIPT_SWEEP_INTERVAL_SECONDS: z.coerce.number().int().min(0).max(DAY).default(60),
    RECEIPT_SWEEP_BATCH_SIZE: z.coerce.number().int().min(1).max(100_000).default(1_000),
    /**
     * How long an authenticated client may be served from memory (0: never). A revocation empties the
     * cache at once through NOTIFY, heard on one connection of the pool; this bounds an entry's age on top of that.
     */
    API_KEY_CACHE_SECONDS: z.coerce.number().int().min(0).max(3600).default(60),
    /** Rate limits (auth/rate-limits.ts), per API process, per window; 0 turns one off. */
    RATE_LIMIT_WINDOW_SECONDS: z.coerce.number().int().min(1).max(3600).default(10),
    /** Requests one API client may send per window: high by default, so load tests and benchmarks are not throttled. */
    RATE_LIMIT_CLIENT_REQUESTS: z.coerce.number().int().min(0).max(10_000_000).default(50_000),
    /** Requests with a missing or invalid credential one source address may send per window. */
    RATE_LIMIT_UNAUTHENTICATED_REQUESTS: z.coerce.number().int().min(0).max(10_000_000).default(100),
    /**
     * The proxies in front of the API whose `X-Forwarded-For` is believed: addresses, CIDR blocks, or
     * `loopback`, `linklocal`, `uniquelocal`, comma-separated (proxy-addr, as Express's `trust proxy`).
     * The source address is then the nearest one not in the list. Empty (the default): the TCP peer,
     * and the header is ignored, so a caller cannot name itself another address.
     */
    TRUSTED_PROXIES: envFields.commaList('').superRefine((list, context) => {
      try {
        proxyaddr.compile(list);
      } catch (error) {
        context.addIssue({
          code: 'custom',
          message: `must list addresses, CIDR blocks or loopback/linklocal/uniquelocal (${(error as Error).message})`,
        });
      }
    }),
    /**
     * Test-only: honours `X-Fault-Injection: before-commit` (command-runner.ts), with which any client can
     * make its request fail. Accepted only with NODE_ENV=test: never in production, staging or `npm start`.
     */
    FAULT_INJECTION: envFields.flag(false),
  })
  .refine((config) => !config.FAULT_INJECTION || config.NODE_ENV === 'test', {
    path: ['FAULT_INJECTION'],
    message: 'is a test-only switch (any client could make requests fail): it needs NODE_ENV=test',
  })
  // The cache listens for revocations on a pooled connection of its own: a pool of one would leave none for requests.
  .refine((config) => config.API_KEY_CACHE_SECONDS === 0 || config.DATABASE_POOL_SIZE >= 2, {
    path: ['DATABASE_POOL_SIZE'],
    message: 'must be at least 2 while API_KEY_CACHE_SECONDS is not 0 (the cache holds one connection to hear revocations)',
  })
  .refine((config) => (config.DATABASE_STATEMENT_LANES ?? 0) <= config.DATABASE_POOL_SIZE, {
    path: ['DATABASE_STATEMENT_LANES'],
    message: 'must be at most DATABASE_POOL_SIZE (each lane is a connection of the pool)',
  })
  .refine((config) => config.IDEMPOTENCY_LOCK_TIMEOUT_MS < config.DATABASE_STATEMENT_TIMEOUT_MS, {
    path: ['IDEMPOTENCY_LOCK_TIMEOUT_MS'],
    message: 'must be shorter than DATABASE_STATEMENT_TIMEOUT_MS',
  })
  .transform((config) => ({
    ...config,
    DATABASE_STATEMENT_LANES: config.DATABASE_STATEMENT_LANES ?? Math.min(2, config.DATABASE_POOL_SIZE),
  }));

export type CommandApiConfig = z.infer<typeof commandApiConfig>;
