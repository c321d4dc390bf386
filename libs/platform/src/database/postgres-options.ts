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
  /**
   * pg's pipeline mode on every connection: statements sent without awaiting the previous one are
   * written at once and answered in order. `inTransaction` then writes BEGIN and COMMIT together with
   * a statement (two round trips fewer); code that awaits each statement behaves as without it.
   */
  pipeline?: boolean;
}

/** TypeORM options for one of the service's PostgreSQL databases. Schema changes come from migrations only. */
export function postgresOptions(input: PostgresOptionsInput): DataSourceOptions {
  return {
    type: 'postgres',
    url: input.url,
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
      idle_in_transaction_session_timeout: 60_000,
      pipeline: input.pipeline ?? false,
    },
  };
}
