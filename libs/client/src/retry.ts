/** How the client retries one logical action. Every retry reuses the action's Idempotency-Key. */
export interface RetryPolicy {
  /** Give up after this long in total, waits included (default 30 s). Keep it far below the key's retention. */
  deadlineMs: number;
  /** Abort one attempt after this long (default 10 s); its outcome is then unknown and resolved through the receipt. */
  attemptTimeoutMs: number;
  /** First backoff bound (default 100 ms); it doubles per attempt up to `maxDelayMs` (default 5 s), full jitter. */
  baseDelayMs: number;
  maxDelayMs: number;
  /**
   * Never start another attempt with less than this left before the deadline (default 250 ms): it could
   * hardly be answered, and cut short it would only leave one more outcome unknown.
   */
  minAttemptMs: number;
}

export const defaultRetryPolicy: RetryPolicy = {
  deadlineMs: 30_000,
  attemptTimeoutMs: 10_000,
  baseDelayMs: 100,
  maxDelayMs: 5_000,
  minAttemptMs: 250,
};

/**
 * The wait before attempt `attempt + 1`: the server's Retry-After when it sent one (plus up to one base
 * delay of jitter, so clients told the same second do not return together), otherwise exponential
 * backoff with full jitter: a uniform draw in [0, min(max, base * 2^(attempt-1))].
 */
export function retryDelay(policy: RetryPolicy, attempt: number, retryAfterMs: number | undefined, random = Math.random): number {
  if (retryAfterMs !== undefined) return retryAfterMs + random() * policy.baseDelayMs;
  const bound = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(attempt - 1, 30));
  return random() * bound;
}

/** Retry-After in milliseconds: delta-seconds or an HTTP date (RFC 9110 10.2.3); undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1_000;
  if (!/^[A-Za-z]{3},? /.test(value.trim())) return undefined; // an HTTP date starts with the day's name
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
