import type { DataSourceOptions } from 'typeorm';
import { postgresOptions } from '@app/platform';

/**
 * The notifier's PostgreSQL sessions: its inbox transactions, and the dispatcher's claims and settles.
 * Planned for queues (QUEUE_PLANNER_SETTINGS): the dispatcher claims through the index of pending
 * deliveries, about once per event, and a bitmap scan there read again every row delivered since the
 * last vacuum on every claim. Every statement of the notifier has an index for what it reads.
 */
export function notifierDatabase({ url, poolSize }: { url: string; poolSize: number }): DataSourceOptions {
  return postgresOptions({
    url,
    applicationName: 'notifier',
    poolSize,
    statementTimeoutMs: 30_000,
    // The inbox transaction writes BEGIN with its first statement (inTransaction).
    pipeline: true,
    plannedForQueues: true,
  });
}
