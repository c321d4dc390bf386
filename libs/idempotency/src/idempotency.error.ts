export type IdempotencyErrorCode =
  /** Same scope, different meaning: the key was already used for another request. */
  | 'IDEMPOTENCY.KEY_REUSED'
  /** Another request with the same scope is still running past the wait bound. */
  | 'IDEMPOTENCY.IN_PROGRESS'
  /** The receipt expired and is kept as a tombstone: the key is refused until `tombstoneUntil`, whatever the request. */
  | 'IDEMPOTENCY.KEY_EXPIRED';

export class IdempotencyError extends Error {
  constructor(
    readonly code: IdempotencyErrorCode,
    message: string,
    /** Facts a client can act on (KEY_EXPIRED: `expiredAt`, `tombstoneUntil` as ISO strings); extension members of its problem. */
    readonly details: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'IdempotencyError';
  }
}
