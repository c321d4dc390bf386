import {
  ClientError,
  OutcomeExpiredError,
  OutcomeUnknownError,
  ProblemError,
  problemError,
  RateLimitedError,
  ReplayInfo,
  RequestInProgressError,
  RequestTimeoutError,
  ServiceUnavailableError,
  UnexpectedResponseError,
} from './errors';
import { describeError } from './describe-error';
import { Problem, ProblemTypes } from './problems';
import { defaultRetryPolicy, parseRetryAfter, retryDelay, RetryPolicy } from './retry';
import { CancelOrderFields, CommandOutcome, CreateOrderFields, IdempotentOperation, Order, Receipt } from './types';

export interface OrdersClientOptions {
  /** Where the command API answers, e.g. `http://127.0.0.1:3000`. */
  baseUrl: string;
  /** An API key from `npm run ops -- clients:create --tenant <id>`; its tenant is the scope of every key. */
  apiKey: string;
  retry?: Partial<RetryPolicy>;
  /** Makes a key for an action sent without one (default: a random UUID). */
  newKey?: () => string;
  /** Headers sent with every request (e.g. a `traceparent`); Authorization, Idempotency-Key and Content-Type are the client's own. */
  headers?: Record<string, string>;
  /** Called before each wait, for logs and metrics: which attempt failed, why, and how long the client waits. */
  onRetry?: (event: RetryEvent) => void;
}

export interface RetryEvent {
  /** The action's Idempotency-Key; undefined for reads. */
  key?: string;
  /** The attempt that just failed (1 = the first request). */
  attempt: number;
  /** What happened: a status and problem type, or the network error. */
  reason: string;
  /** Whether that attempt may have been applied (the client asks for the receipt before sending again). */
  outcomeUnknown: boolean;
  delayMs: number;
}

export interface CallOptions {
  /**
   * The action's Idempotency-Key. Pass one you stored with the action when the same action may be sent
   * again by another process (after a crash, from a queue); otherwise the client makes one per call.
   */
  key?: string;
  /** Stops waiting; an attempt in flight then ends as OutcomeUnknownError (ask again with the same key). */
  signal?: AbortSignal;
  /** This call's total deadline instead of the client's. */
  deadlineMs?: number;
}

/** The answer to one HTTP request, read to the end. */
interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

/** A request that ended without an answer, and whether it can have reached the service. */
class NoAnswer extends Error {
  constructor(
    override readonly cause: unknown,
    /** False only when the connection was refused: nothing was sent. */
    readonly maybeApplied: boolean,
  ) {
    super(describeError(cause));
  }
}

class AttemptTimedOut extends Error {
  constructor(ms: number) {
    super(`no answer within ${ms} ms`);
  }
}

/**
 * A gateway's own answers (no problem document) that mean "try again". 502/503/504 may follow a request
 * it passed on and whose reply it lost (an upstream reset, a timeout): the outcome is unknown.
 */
const GATEWAY_LOST_REPLY = new Set([502, 503, 504]);
/** 408/429: the gateway kept the request (not received whole in time, over its own limit): not applied, send again. */
const GATEWAY_KEPT_REQUEST = new Set([408, 429]);
const GATEWAY_TRY_AGAIN = new Set([...GATEWAY_LOST_REPLY, ...GATEWAY_KEPT_REQUEST]);

/**
 * The command API's client. Each call is one logical action with one Idempotency-Key, reused on every
 * retry; retries follow Retry-After or back off exponentially with jitter, within a total deadline.
 * After an unknown outcome (timeout, reset, 502/503/504) the client asks the service for the key's
 * receipt before it sends again, and reports whether the answer was the original or a replay.
 * Every error that ends a command carries its key (`key`, or a problem's `replay.key`), except a
 * connection refused while no request with the key can have reached the service: then none was applied.
 */
export class OrdersClient {
  private readonly baseUrl: string;
  private readonly policy: RetryPolicy;
  private readonly newKey: () => string;

  constructor(private readonly options: OrdersClientOptions) {
    if (!options.apiKey) throw new TypeError('OrdersClient: apiKey is required');
    this.baseUrl = new URL(options.baseUrl).toString().replace(/\/$/, '');
    this.policy = { ...defaultRetryPolicy, ...options.retry };
    this.newKey = options.newKey ?? (() => crypto.randomUUID());
  }

  /** `POST /v1/orders`: places an order once per key. Throws CustomerRefAlreadyUsedError, InvalidRequestError, … */
  createOrder(fields: CreateOrderFields, options: CallOptions = {}): Promise<CommandOutcome<Order>> {
    return this.command<Order>('orders.create', '/v1/orders', fields, options);
  }

  /** `POST /v1/orders/{id}/cancel`: cancels once per key. Throws OrderNotFoundError, OrderAlreadyCancelledError, … */
  cancelOrder(orderId: string, reason: string, options: CallOptions = {}): Promise<CommandOutcome<Order>> {
    const fields: CancelOrderFields = { reason };
    return this.command<Order>('orders.cancel', `/v1/orders/${encodeURIComponent(orderId)}/cancel`, fields, options);
  }

  /** `GET /v1/orders/{id}` (needs orders.read). Throws OrderNotFoundError. */
  async getOrder(orderId: string, options: Omit<CallOptions, 'key'> = {}): Promise<Order> {
    return (await this.read(`/v1/orders/${encodeURIComponent(orderId)}`, options)) as Order;
  }

  /** `GET /v1/idempotency-receipts/{operation}/{key}`: what the service remembers for the key, or undefined. */
  async getReceipt(operation: IdempotentOperation, key: string, options: Omit<CallOptions, 'key'> = {}): Promise<Receipt | undefined> {
    try {
      return (await this.read(this.receiptPath(operation, key), options)) as Receipt;
    } catch (error) {
      if (error instanceof ProblemError && error.type === ProblemTypes.receiptNotFound) return undefined;
      throw error;
    }
  }

  private async command<T>(operation: IdempotentOperation, path: string, body: object, options: CallOptions): Promise<CommandOutcome<T>> {
    const key = options.key ?? this.newKey();
    const startedAt = Date.now();
    const deadline = startedAt + (options.deadlineMs ?? this.policy.deadlineMs);
    let attempts = 0;
    let resolvedFromReceipt = false;
    // Why the outcome of an earlier attempt is unknown; cleared once the service has the request for sure.
    let unknown: unknown;
    // A 409 said the service holds a request with this key: it may commit even if the service is unreachable after.
    let held = false;
    for (let round = 1; ; round++) {
      if (unknown !== undefined) {
        const asked = await this.ask(operation, key, startedAt, options.signal, deadline);
        if (asked.kind === 'expired') throw new OutcomeExpiredError(key, asked.receipt, attempts);
        if (asked.kind === 'unanswered') {
          await this.waitOrGiveUp({
            key,
            round,
            reason: asked.reason,
            unknown,
            attempts,
            retryAfterMs: asked.retryAfterMs,
            deadline,
            options,
          });
          continue;
        }
        if (asked.kind === 'applied') resolvedFromReceipt = true;
      }

      attempts++;
      let answer: Answer;
      try {
        answer = await this.send('POST', path, { key, body }, deadline, options.signal);
      } catch (error) {
        const failure = error as NoAnswer;
        if (failure.maybeApplied || held) unknown = failure.cause;
        if (options.signal?.aborted) throw unknown === undefined ? options.signal.reason : new OutcomeUnknownError(key, attempts, unknown);
        await this.waitOrGiveUp({ key, round, reason: failure.message, unknown, lastError: failure.cause, attempts, deadline, options });
        continue;
      }

      const replay: ReplayInfo = {
        key,
        replayed: answer.headers.get('idempotent-replayed') === 'true',
        expiresAt: httpDate(answer.headers.get('idempotency-expires')),
      };
      const requestId = answer.headers.get('x-request-id') ?? undefined;
      if (answer.status >= 200 && answer.status < 300) {
        return { value: answer.json as T, status: answer.status, ...replay, attempts, resolvedFromReceipt, requestId };
      }
      const problem = asProblem(answer);
      if (!problem) {
        const unexpected = new UnexpectedResponseError(answer.status, answer.text, key);
        if (!GATEWAY_TRY_AGAIN.has(answer.status))
          throw unknown === undefined ? unexpected : new OutcomeUnknownError(key, attempts, unexpected);
        if (GATEWAY_LOST_REPLY.has(answer.status)) unknown = unexpected;
        await this.waitOrGiveUp({
          key,
          round,
          reason: `${answer.status} from a gateway`,
          unknown,
          lastError: unexpected,
          attempts,
          retryAfterMs: parseRetryAfter(answer.headers.get('retry-after')),
          deadline,
          options,
        });
        continue;
      }
      const error = problemError(problem, requestId, replay, attempts);
      if (error instanceof RequestInProgressError) {
        unknown = undefined; // the service has it: the next attempt waits for it and replays
        held = true;
      }
      if (error instanceof ServiceUnavailableError) unknown = error; // a database trouble during COMMIT leaves the outcome open
      if (!(error instanceof RequestInProgressError || error instanceof ServiceUnavailableError || sendAgain(error))) throw error;
      const retryAfterMs = parseRetryAfter(answer.headers.get('retry-after'));
      await this.waitOrGiveUp({
        key,
        round,
        reason: `${error.status} ${error.type}`,
        unknown,
        lastError: error,
        attempts,
        retryAfterMs,
        deadline,
        options,
      });
    }
  }

  /**
   * After an unknown outcome: was the action applied? A receipt that expired before this call began
   * belongs to an earlier action with the same key (a key reused after its retention) and reads as absent.
   */
  private async ask(
    operation: IdempotentOperation,
    key: string,
    startedAt: number,
    signal: AbortSignal | undefined,
    deadline: number,
  ): Promise<
    { kind: 'applied' | 'absent' } | { kind: 'expired'; receipt: Receipt } | { kind: 'unanswered'; reason: string; retryAfterMs?: number }
  > {
    let answer: Answer;
    try {
      answer = await this.send('GET', this.receiptPath(operation, key), {}, deadline, signal);
    } catch (error) {
      // Also when the caller's signal ended it: the outcome stays unknown, which the wait that follows reports.
      return { kind: 'unanswered', reason: `receipt lookup: ${(error as Error).message}` };
    }
    if (answer.status === 200) {
      const receipt = answer.json as Receipt;
      if (receipt.status !== 'expired') return { kind: 'applied' };
      return Date.parse(receipt.expiresAt) < startedAt ? { kind: 'absent' } : { kind: 'expired', receipt };
    }
    const problem = asProblem(answer);
    if (problem?.type === ProblemTypes.receiptNotFound) return { kind: 'absent' };
    // Not an answer about the key (the service's or a gateway's trouble, a limit): ask again after the wait.
    if (answer.status >= 500 || GATEWAY_KEPT_REQUEST.has(answer.status)) {
      return {
        kind: 'unanswered',
        reason: `receipt lookup: ${answer.status}`,
        retryAfterMs: parseRetryAfter(answer.headers.get('retry-after')),
      };
    }
    // 401/403/400: the lookup itself is refused; the command will be refused the same way, so send it and let that answer speak.
    return { kind: 'absent' };
  }

  private async read(path: string, options: Omit<CallOptions, 'key'>): Promise<unknown> {
    const deadline = Date.now() + (options.deadlineMs ?? this.policy.deadlineMs);
    for (let round = 1; ; round++) {
      let answer: Answer;
      try {
        answer = await this.send('GET', path, {}, deadline, options.signal);
      } catch (error) {
        const failure = error as NoAnswer;
        if (options.signal?.aborted) throw failure.cause;
        await this.waitOrGiveUp({ round, reason: failure.message, lastError: failure.cause, attempts: round, deadline, options });
        continue;
      }
      if (answer.status === 200) return answer.json;
      const problem = asProblem(answer);
      if (!problem) {
        const unexpected = new UnexpectedResponseError(answer.status, answer.text);
        if (!GATEWAY_TRY_AGAIN.has(answer.status)) throw unexpected;
        await this.waitOrGiveUp({
          round,
          reason: `${answer.status} from a gateway`,
          lastError: unexpected,
          attempts: round,
          retryAfterMs: parseRetryAfter(answer.headers.get('retry-after')),
          deadline,
          options,
        });
        continue;
      }
      const error = problemError(problem, answer.headers.get('x-request-id') ?? undefined, undefined, round);
      if (!(error instanceof ServiceUnavailableError || sendAgain(error))) throw error;
      const retryAfterMs = parseRetryAfter(answer.headers.get('retry-after'));
      await this.waitOrGiveUp({
        round,
        reason: `${error.status} ${error.type}`,
        lastError: error,
        attempts: round,
        retryAfterMs,
        deadline,
        options,
      });
    }
  }

  /**
   * Waits before the next attempt, or throws when the wait would pass the deadline: OutcomeUnknownError
   * while an attempt's outcome is unknown, otherwise the last error.
   */
  private async waitOrGiveUp(at: {
    key?: string;
    round: number;
    reason: string;
    unknown?: unknown;
    lastError?: unknown;
    attempts: number;
    retryAfterMs?: number;
    deadline: number;
    options: Omit<CallOptions, 'key'>;
  }): Promise<void> {
    const delayMs = retryDelay(this.policy, at.round, at.retryAfterMs);
    const giveUp = () => {
      if (at.key !== undefined && at.unknown !== undefined) return new OutcomeUnknownError(at.key, at.attempts, at.unknown);
      return at.lastError instanceof Error ? at.lastError : new ClientError(`gave up after ${at.attempts} attempt(s): ${at.reason}`);
    };
    if (Date.now() + delayMs + Math.min(this.policy.minAttemptMs, this.policy.attemptTimeoutMs) >= at.deadline) throw giveUp();
    this.options.onRetry?.({ key: at.key, attempt: at.round, reason: at.reason, outcomeUnknown: at.unknown !== undefined, delayMs });
    await sleep(delayMs, at.options.signal).catch(() => {
      throw giveUp();
    });
  }

  /** One request, read to the end, bounded by the attempt timeout, the deadline and the caller's signal. */
  private async send(
    method: 'GET' | 'POST',
    path: string,
    { key, body }: { key?: string; body?: object },
    deadline: number,
    signal: AbortSignal | undefined,
  ): Promise<Answer> {
    const timeoutMs = Math.max(1, Math.min(this.policy.attemptTimeoutMs, deadline - Date.now()));
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(new AttemptTimedOut(timeoutMs)), timeoutMs);
    const abort = signal ? AbortSignal.any([signal, timeout.signal]) : timeout.signal;
    try {
      const response = await fetch(`${this.baseUrl}${path}`, {
        method,
        signal: abort,
        headers: {
          ...this.options.headers,
          Authorization: `Bearer ${this.options.apiKey}`,
          Accept: 'application/json, application/problem+json',
          ...(key !== undefined && { 'Idempotency-Key': key }),
          ...(body !== undefined && { 'Content-Type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, headers: response.headers, text, json: parseJson(text) };
    } catch (error) {
      const cause = abort.aborted ? abort.reason : error;
      throw new NoAnswer(cause, !refused(error));
    } finally {
      clearTimeout(timer);
    }
  }

  private receiptPath(operation: IdempotentOperation, key: string): string {
    return `/v1/idempotency-receipts/${encodeURIComponent(operation)}/${encodeURIComponent(key)}`;
  }
}

/** The connection was refused (nothing listened): the request never reached the service. */
function refused(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string } })?.cause;
  return cause?.code === 'ECONNREFUSED';
}

/** Answers that say this attempt was not applied and another may be: over budget (429), or not received whole in time (408). */
function sendAgain(error: ProblemError): boolean {
  return error instanceof RateLimitedError || error instanceof RequestTimeoutError;
}

function asProblem(answer: Answer): Problem | undefined {
  const json = answer.json as Partial<Problem> | undefined;
  const isProblem = /^application\/problem\+json/.test(answer.headers.get('content-type') ?? '');
  return isProblem && json && typeof json.type === 'string' && typeof json.status === 'number' ? (json as Problem) : undefined;
}

function parseJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

function httpDate(value: string | null): Date | undefined {
  const at = value === null ? NaN : Date.parse(value);
  return Number.isNaN(at) ? undefined : new Date(at);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
