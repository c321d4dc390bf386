import { setTimeout as sleep } from 'node:timers/promises';
import { isDatabaseUnreachable } from './database-errors';

export interface LostSessionRetry {
  /** Runs of `work` in all, the first included. */
  attempts: number;
  /** No new run starts this long after the first one started: a real outage answers in bounded time. */
  budgetMs: number;
  /** Pause before the n-th rerun (the last entry repeats). */
  pausesMs: number[];
}

/**
 * Long enough to ride out a server restart or a failover, which refuses connections for a second or
 * two; short enough that a real outage is a 503 to retry well inside a client's timeout.
 */
export const LOST_SESSION_RETRY: LostSessionRetry = { attempts: 30, budgetMs: 5_000, pausesMs: [10, 100, 250, 500] };

/**
 * Runs `work` again when the database session it used was lost (terminated, reset, refused): a pooled
 * connection that died under a request, or a server that restarts, is not an outage, and a later
 * connection works. Only for work that
 * is safe to run twice — a read, or a transaction that re-decides from what is committed, as every
 * idempotent command does: if the lost attempt did commit, the rerun finds its receipt and replays it.
 * Statement errors (timeouts, deadlocks, lock waits) are not retried here; nor is anything once the
 * attempts or the time budget are spent: then the error propagates (for HTTP, a 503 to retry).
 */
export async function retryOnLostSession<T>(work: () => Promise<T>, options: Partial<LostSessionRetry> = {}): Promise<T> {
  const { attempts, budgetMs, pausesMs } = { ...LOST_SESSION_RETRY, ...options };
  const started = Date.now();
  for (let run = 1; ; run++) {
    try {
      return await work();
    } catch (error) {
      const pause = pausesMs[Math.min(run - 1, pausesMs.length - 1)] ?? 0;
      if (!isDatabaseUnreachable(error) || run >= attempts || Date.now() + pause - started >= budgetMs) throw error;
      await sleep(pause);
    }
  }
}
