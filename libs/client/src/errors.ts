import { Problem, ProblemType, ProblemTypes } from './problems';
import type { Receipt } from './types';
import { describeError } from './describe-error';

/** What every answer of an idempotent command says about the key, first or replayed. */
export interface ReplayInfo {
  /** The Idempotency-Key the action was sent with (on every attempt). */
  key: string;
  /** True when this is the stored answer of an earlier attempt (`Idempotent-Replayed: true`). */
  replayed: boolean;
  /** When the service forgets the key (`Idempotency-Expires`); after it the same key is a new action. */
  expiresAt?: Date;
}

/** Base of every error the client throws. */
export class ClientError extends Error {
  override name = 'ClientError';
}

/**
 * The service answered with a problem (RFC 9457). Subclasses name the types a caller handles;
 * `problem` keeps the whole document (detail, extension members such as `orderId`).
 */
export class ProblemError extends ClientError {
  override name = 'ProblemError';
  readonly status: number;
  readonly type: string;

  constructor(
    readonly problem: Problem,
    /** X-Request-Id of the answer: what the service logged it under. */
    readonly requestId: string | undefined,
    /** Set for answers of idempotent commands: the key, whether the answer was replayed, its expiry. */
    readonly replay: ReplayInfo | undefined,
    /** How many requests the client sent for this call. */
    readonly attempts: number,
  ) {
    super(`${problem.status} ${problem.title}${problem.detail ? `: ${problem.detail}` : ''}`);
    this.status = problem.status;
    this.type = problem.type;
  }
}

/** 400: the request breaks a field or body rule; nothing was stored, the key stays unused. Never retried. */
export class InvalidRequestError extends ProblemError {
  override name = 'InvalidRequestError';
}
/** 401: missing, unknown or revoked API key. */
export class UnauthenticatedError extends ProblemError {
  override name = 'UnauthenticatedError';
}
/** 403: the API key is not allowed this operation. */
export class ForbiddenError extends ProblemError {
  override name = 'ForbiddenError';
}
/** 413 or 415: the body is too large or not JSON. */
export class UnacceptableBodyError extends ProblemError {
  override name = 'UnacceptableBodyError';
}
/** 429: over budget; retried after Retry-After until the deadline, then thrown. */
export class RateLimitedError extends ProblemError {
  override name = 'RateLimitedError';
}
/**
 * 408: the request did not reach the service whole within its bound (a stalled network), so it was not
 * applied; sent again with the same key until the deadline, then thrown.
 */
export class RequestTimeoutError extends ProblemError {
  override name = 'RequestTimeoutError';
}
/** 422: the key was already used for a different request in this scope. A programming error: never retried. */
export class IdempotencyKeyReusedError extends ProblemError {
  override name = 'IdempotencyKeyReusedError';
}
/**
 * 422: the key expired and the operation keeps a tombstone for it: the service refuses to run it again.
 * The action this key named was done long ago; a new action needs a new key.
 */
export class IdempotencyKeyExpiredError extends ProblemError {
  override name = 'IdempotencyKeyExpiredError';
}
/** 409: a request with this key is still being processed; retried until the deadline, then thrown. */
export class RequestInProgressError extends ProblemError {
  override name = 'RequestInProgressError';
}
/** 404: no such order (for this tenant). A stored outcome: a retry with the same key replays it. */
export class OrderNotFoundError extends ProblemError {
  override name = 'OrderNotFoundError';
}
/** 409: the order was already cancelled; `problem.order` holds it for clients allowed orders.read. */
export class OrderAlreadyCancelledError extends ProblemError {
  override name = 'OrderAlreadyCancelledError';
}
/** 409: another order of this tenant has this customerRef; `problem.orderId` names it for clients allowed orders.read. */
export class CustomerRefAlreadyUsedError extends ProblemError {
  override name = 'CustomerRefAlreadyUsedError';
}
/** 503: the service could not reach its database; retried (after asking for the receipt) until the deadline, then thrown. */
export class ServiceUnavailableError extends ProblemError {
  override name = 'ServiceUnavailableError';
}

/** 500: an unexpected failure, logged by the service under `requestId`. Not retried: its transaction rolled back. */
export class ServerError extends ProblemError {
  override name = 'ServerError';
}

const byType: Record<string, typeof ProblemError> = {
  [ProblemTypes.invalidRequest]: InvalidRequestError,
  [ProblemTypes.unauthenticated]: UnauthenticatedError,
  [ProblemTypes.forbidden]: ForbiddenError,
  [ProblemTypes.requestTooLarge]: UnacceptableBodyError,
  [ProblemTypes.unsupportedMediaType]: UnacceptableBodyError,
  [ProblemTypes.rateLimited]: RateLimitedError,
  [ProblemTypes.requestTimeout]: RequestTimeoutError,
  [ProblemTypes.idempotencyKeyReused]: IdempotencyKeyReusedError,
  [ProblemTypes.idempotencyKeyExpired]: IdempotencyKeyExpiredError,
  [ProblemTypes.requestInProgress]: RequestInProgressError,
  [ProblemTypes.orderNotFound]: OrderNotFoundError,
  [ProblemTypes.orderAlreadyCancelled]: OrderAlreadyCancelledError,
  [ProblemTypes.customerRefAlreadyUsed]: CustomerRefAlreadyUsedError,
  [ProblemTypes.serviceUnavailable]: ServiceUnavailableError,
  [ProblemTypes.internalServerError]: ServerError,
} satisfies Partial<Record<ProblemType, typeof ProblemError>>;

/** The typed error for a problem document, chosen by its `type` (a plain ProblemError for a type this client does not know). */
export function problemError(problem: Problem, requestId: string | undefined, replay: ReplayInfo | undefined, attempts: number) {
  const Type = byType[problem.type] ?? ProblemError;
  return new Type(problem, requestId, replay, attempts);
}

/**
 * The client gave up (deadline or caller's signal) while the outcome of the last attempt was unknown:
 * the request may or may not have been applied. Nothing is lost: retry later with the same `key`
 * (it replays if the action was applied, and runs it otherwise) or ask with `getReceipt`.
 */
export class OutcomeUnknownError extends ClientError {
  override name = 'OutcomeUnknownError';
  constructor(
    readonly key: string,
    readonly attempts: number,
    override readonly cause: unknown,
  ) {
    super(`the outcome of the request with Idempotency-Key ${key} is unknown after ${attempts} attempt(s): ${describeError(cause)}`);
  }
}

/**
 * An earlier attempt whose reply was lost was applied, but its key has expired since: sending again
 * would run the action a second time, so the client did not. `receipt.effect` names what it did.
 */
export class OutcomeExpiredError extends ClientError {
  override name = 'OutcomeExpiredError';
  constructor(
    readonly key: string,
    readonly receipt: Receipt,
    readonly attempts: number,
  ) {
    super(
      `the request with Idempotency-Key ${key} was applied (${receipt.effect ? `${receipt.effect.type} ${receipt.effect.id}` : `status ${receipt.responseStatus}`}) ` +
        `but its key expired at ${receipt.expiresAt}; not sent again`,
    );
  }
}

/**
 * An answer that is not the API's (no problem document) and not a gateway's "try again" (`502`-`504`,
 * `408`, `429`): a gateway's `500`, a wrong URL's page. For a command, `key` is its Idempotency-Key:
 * the client cannot tell whether a gateway passed the request on, so send the action again with that
 * key (it replays if it was applied) or ask `getReceipt`. Also the last error at the deadline after a
 * gateway's `408`/`429` while no attempt can have been applied, and after any gateway answer to a read.
 */
export class UnexpectedResponseError extends ClientError {
  override name = 'UnexpectedResponseError';
  constructor(
    readonly status: number,
    readonly body: string,
    /** The command's Idempotency-Key; undefined for reads. */
    readonly key?: string,
  ) {
    super(`unexpected answer ${status}: ${body.slice(0, 200)}`);
  }
}
