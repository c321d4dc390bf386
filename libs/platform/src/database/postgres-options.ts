import type { DataSourceOptions } from 'typeorm';

export interface PostgresOptionsInput {
  url: string;
  /** Shown in pg_stat_activity, so an operator can tell which app holds a connection. */
  applicationName: string;
  entities?: DataSourceOptions['entities'];
  migrations?: DataSourceOptions['migrations'];
  poolSize?: number;
  /** Bound for establishing a connection; a dead server must fail fast, not hang a request. */
  connectTimeoutMs?: number;
  /** Session `lock_timeout`: the longest any statement waits for a lock (0 = no bound). */
  lockTimeoutMs?: number;
  /** Session `statement_timeout` (0 = no bound). */
  statementTimeoutMs?: number;
  /** Session `idle_in_transaction_session_timeout`: 60 s unless given. */
  idleInTransactionTimeoutMs?: number;
  /**
   * pg's pipeline mode on every connection: statements sent without awaiting the previous one are
   * written at once and answered in order. `inTransaction` then writes BEGIN and COMMIT together with
   * a statement (two round trips fewer); code that awaits each statement behaves as without it.
   */
  pipeline?: boolean;
  /**
   * Every session of the pool plans as a queue's claims need (QUEUE_PLANNER_SETTINGS): for an app whose
   * statements all have an index for what they read, one of them a claim through an index of pending rows.
   */
  plannedForQueues?: boolean;
}

/**
 * Planner settings for a session that claims work from a queue table (the relay's outbox, the notifier's
 * webhook deliveries) through a partial index of the pending rows, ordered, with a LIMIT.
 * - `enable_bitmapscan = off`: a done row's entry in the index of pending rows stays until a vacuum,
 *   which autovacuum runs at most once a minute per database and, on a table keeping days of done rows,
 *   only after a fifth of them changed. A bitmap scan visits every such entry's row again on every claim
 *   and never marks it; an index scan marks the dead entries it meets (PostgreSQL's kill_prior_tuple), so
 *   each is paid for once and the claims after it step over it in the index's pages. Claims come about
 *   once per event at a trickle: with bitmap scans, 200 events/s made each of these sessions one of the
 *   busiest processes on the machine. The claim wants the index's order anyway.
 * - `enable_seqscan = off`: on a table never analyzed (its first minute, a cluster just pg_upgraded,
 *   autovacuum off) the planner guesses, and picked that bitmap scan, or a scan of the whole table
 *   once per claim. A session whose statements all have an index for what they read is planned with
 *   those indexes whatever the statistics say; a table without a usable index (a small one) is still
 *   scanned, at a penalty only in the plan's cost.
 * - `jit = off`: that penalty (10^10) is above every JIT threshold, and statements on such a small
 *   table were compiled with LLVM on every run (the relay's heartbeat on its instance table: 20-80 ms
 *   each instead of 0.1 ms, and with three relays rows waited seconds). No statement of these sessions
 *   is long enough for JIT to pay off anyway.
 * - `plan_cache_mode = force_generic_plan`: a prepared statement is planned once per session, not on
 *   every run. PostgreSQL's own rule keeps planning a statement for the values at hand while that plan
 *   looks cheaper than the one for any values, and a statement over an array of ids (`id = ANY($1)`,
 *   `unnest($1, …)`) always looks cheaper planned for the few ids a trickle brings: at 200 commands/s
 *   the relay's mark was planned on every run (0.06 ms each, more planning than any other statement of
 *   the chain), the notifier's settle in some runs too (0.2 ms each). With the settings above, every
 *   statement of these sessions reads through its index whatever the values, so one plan fits all runs.
 */
export const QUEUE_PLANNER_SETTINGS = {
  enable_bitmapscan: 'off',
  enable_seqscan: 'off',
  jit: 'off',
  plan_cache_mode: 'force_generic_plan',
} as const;

/** TypeORM options for one of the service's PostgreSQL databases. Schema changes come from migrations only. */
export function postgresOptions(input: PostgresOptionsInput): DataSourceOptions {
  return {
    type: 'postgres',
    url: input.plannedForQueues ? withStartupSettings(input.url, QUEUE_PLANNER_SETTINGS) : input.url,
    entities: input.entities ?? [],
    migrations: input.migrations ?? [],
    migrationsTableName: 'typeorm_migrations',
    migrationsTransactionMode: 'each',
    synchronize: false,
    migrationsRun: false,
    // Failed queries surface as thrown errors and are logged by their caller, with context.
    logging: false,
    applicationName: input.applicationName,
    poolSize: input.poolSize ?? 10,
    connectTimeoutMS: input.connectTimeoutMs ?? 5_000,
    extra: {
      idleTimeoutMillis: 30_000,
      lock_timeout: input.lockTimeoutMs ?? 0,
      statement_timeout: input.statementTimeoutMs ?? 0,
      // A transaction left open by a crashed handler must not hold its locks forever.
      idle_in_transaction_session_timeout: input.idleInTransactionTimeoutMs ?? 60_000,
      pipeline: input.pipeline ?? false,
    },
  };
}

/**
 * `url` with `settings` given at connection start (libpq's `options`, `-c name=value`): every session
 * has them from its first statement. In the URL, after any `options` it already carries (a later `-c`
 * wins): pg lets the URL's parameters override the pool's own, so settings passed beside it were
 * dropped whenever the URL had options of its own.
 */
function withStartupSettings(url: string, settings: Record<string, string>): string {
  const target = new URL(url);
  const own = Object.entries(settings).map(([name, value]) => `-c ${name}=${value}`);
  target.searchParams.set('options', [target.searchParams.get('options'), ...own].filter(Boolean).join(' '));
  return target.toString();
}
