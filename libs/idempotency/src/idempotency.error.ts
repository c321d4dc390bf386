export type IdempotencyErrorCode =
  /** Same scope, different meaning: the key was already used for another request. */
  | 'IDEMPOTENCY.KEY_REUSED'
  /** Another request with the same scope is still running past the wait bound. */
  | 'IDEMPOTENCY.IN_PROGRESS';

export class IdempotencyError extends Error {
  constructor(
    readonly code: IdempotencyErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'IdempotencyError';
  }
}
