/**
 * The one retry policy of the project: exponential backoff with full jitter and a cap. Retry
 * `attempt` (1, 2, …) waits between `minMs` and min(`maxMs`, `minMs` · 2^(attempt-1)), uniformly, so
 * processes that failed together (a broker or database outage) do not come back in one burst.
 */
export interface BackoffPolicy {
  minMs: number;
  maxMs: number;
  /** [0, 1): Math.random unless a test pins it. */
  random?: () => number;
}

/** How long to wait before retry `attempt` (1 for the first retry). */
export function backoffDelay(attempt: number, { minMs, maxMs, random = Math.random }: BackoffPolicy): number {
  const ceiling = Math.min(maxMs, minMs * 2 ** Math.min(Math.max(attempt, 1) - 1, 30));
  return Math.round(minMs + random() * (ceiling - minMs));
}

/** The same policy for a loop that counts its own failures: `next()` after each, `reset()` on success. */
export class Backoff {
  private failures = 0;

  constructor(private readonly policy: BackoffPolicy) {}

  next(): number {
    return backoffDelay(++this.failures, this.policy);
  }

  reset(): void {
    this.failures = 0;
  }

  /** Whether a failure came since the last `reset()`: the loop is in an outage. */
  get failing(): boolean {
    return this.failures > 0;
  }
}
