/** What one POST came to, for metrics: the status class, `timeout` or `error` (no answer). */
export type AttemptResult = '2xx' | '3xx' | '4xx' | '5xx' | 'timeout' | 'error';

export interface PostOutcome {
  result: AttemptResult;
  /** `delivered`; `retry` on the schedule; `refused`: the receiver will not take it as it is (dead at once). */
  verdict: 'delivered' | 'retry' | 'refused';
  statusCode: number | null;
  /** The receiver asked for this much patience (Retry-After on a 429 or 503), in ms. */
  retryAfterMs?: number;
  error?: string;
}

/** A receiver that is overloaded or asks for patience: retried like a 5xx, although 4xx. */
const RETRYABLE_4XX = new Set([408, 425, 429]);

/**
 * One signed POST of `body`. 2xx: delivered. 5xx, 408, 425, 429, a timeout or no answer: retried on
 * the schedule. Any other 4xx and 3xx (redirects are not followed: a signed delivery goes where it
 * was configured to go): the receiver refused this request as it is, and sending it again will not
 * change that — dead at once, with the reason, for an operator to look at (`ops webhooks:retry`).
 */
export async function postWebhook(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<PostOutcome> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    // Drain the body so the connection is reused; what it says does not matter.
    await response.arrayBuffer().catch(() => undefined);
  } catch (error) {
    const timedOut = (error as Error).name === 'TimeoutError';
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return timedOut
      ? { result: 'timeout', verdict: 'retry', statusCode: null, error: `no answer within ${timeoutMs} ms` }
      : {
          result: 'error',
          verdict: 'retry',
          statusCode: null,
          error: `POST failed: ${cause?.code ?? cause?.message ?? (error as Error).message}`,
        };
  }
  const status = response.status;
  const result = `${Math.floor(status / 100)}xx` as AttemptResult;
  if (status >= 200 && status < 300) return { result, verdict: 'delivered', statusCode: status };
  if (status >= 500 || RETRYABLE_4XX.has(status)) {
    return {
      result,
      verdict: 'retry',
      statusCode: status,
      error: `receiver answered ${status}`,
      retryAfterMs: retryAfter(response.headers.get('retry-after')),
    };
  }
  return { result, verdict: 'refused', statusCode: status, error: `receiver answered ${status}; not retried` };
}

/** Retry-After as delay-seconds or an HTTP date, in ms; undefined when absent or unreadable. */
export function retryAfter(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
