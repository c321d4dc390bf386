import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

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

/** Connections kept open between POSTs (Node's agents close one when the receiver's Keep-Alive timeout says). */
const agents = { 'http:': new HttpAgent({ keepAlive: true }), 'https:': new HttpsAgent({ keepAlive: true }) };

class PostTimedOut extends Error {}

/**
 * One signed POST of `body`. 2xx: delivered. 5xx, 408, 425, 429, a timeout or no answer: retried on
 * the schedule. Any other 4xx and 3xx (redirects are not followed: a signed delivery goes where it
 * was configured to go): the receiver refused this request as it is, and sending it again will not
 * change that — dead at once, with the reason, for an operator to look at (`ops webhooks:retry`).
 *
 * Through Node's http client, not `fetch`: fetch's WHATWG layer (request and response objects, streams,
 * abort signals) cost about 0.45 ms of CPU per POST here against 0.08 ms. A kept-alive connection the
 * receiver closed just as it was taken for this POST fails it at once (ECONNRESET on a reused socket,
 * nodejs/node#47130): the POST is sent again on a new connection, as Node's documentation advises, within
 * the same `timeoutMs`; the receiver dedupes by webhook-id in any case.
 */
export async function postWebhook(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<PostOutcome> {
  let answer: Answer;
  try {
    const deadline = Date.now() + timeoutMs;
    const target = new URL(url);
    const signed = { 'content-type': 'application/json', ...headers };
    answer = await post(target, signed, body, timeoutMs).catch((error: unknown) => {
      if (!(error instanceof ReusedConnectionLost)) throw error;
      return post(target, signed, body, Math.max(1, deadline - Date.now()), { fresh: true });
    });
  } catch (error) {
    if (error instanceof PostTimedOut)
      return { result: 'timeout', verdict: 'retry', statusCode: null, error: `no answer within ${timeoutMs} ms` };
    const code = (error instanceof ReusedConnectionLost ? error.cause : error) as NodeJS.ErrnoException;
    return { result: 'error', verdict: 'retry', statusCode: null, error: `POST failed: ${code.code ?? code.message}` };
  }
  const { status } = answer;
  const result = `${Math.floor(status / 100)}xx` as AttemptResult;
  if (status >= 200 && status < 300) return { result, verdict: 'delivered', statusCode: status };
  if (status >= 500 || RETRYABLE_4XX.has(status)) {
    return {
      result,
      verdict: 'retry',
      statusCode: status,
      error: `receiver answered ${status}`,
      retryAfterMs: retryAfter(answer.retryAfter ?? null),
    };
  }
  return { result, verdict: 'refused', statusCode: status, error: `receiver answered ${status}; not retried` };
}

interface Answer {
  status: number;
  retryAfter?: string;
}

/** A kept-alive connection was reset as this POST went out on it: no answer came, and another connection may give one. */
class ReusedConnectionLost extends Error {
  constructor(cause: Error) {
    super(cause.message, { cause });
  }
}

/**
 * The POST, its answer's status and Retry-After once its body has been read; rejects with PostTimedOut
 * after `timeoutMs` in all. `fresh`: on a connection of its own, never a kept-alive one.
 */
function post(target: URL, headers: Record<string, string>, body: string, timeoutMs: number, { fresh = false } = {}): Promise<Answer> {
  return new Promise<Answer>((resolve, reject) => {
    const protocol = target.protocol === 'https:' ? 'https:' : 'http:';
    const send = protocol === 'https:' ? httpsRequest : httpRequest;
    let answered = false;
    // Called only after the request and its timer exist (events come later); if the request cannot be made, nothing was started.
    const fail = (error: Error) => {
      clearTimeout(timer);
      const reused = request.reusedSocket && !answered && (error as NodeJS.ErrnoException).code === 'ECONNRESET';
      reject(reused ? new ReusedConnectionLost(error) : error);
    };
    const request = send(
      target,
      {
        method: 'POST',
        agent: fresh ? false : agents[protocol],
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      },
      (response) => {
        answered = true;
        response.on('error', fail); // `on`, not `once`: a second 'error' with no listener would crash the process
        // Read the body to its end so the connection is reused; what it says does not matter.
        response.resume();
        response.once('end', () => {
          clearTimeout(timer);
          resolve({ status: response.statusCode ?? 0, retryAfter: response.headers['retry-after'] });
        });
      },
    );
    const timer = setTimeout(() => request.destroy(new PostTimedOut()), timeoutMs);
    request.on('error', fail);
    request.end(body);
  });
}

/** Retry-After as delay-seconds or an HTTP date, in ms; undefined when absent or unreadable. */
export function retryAfter(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
