/** The order as every endpoint shows it. */
export interface Order {
  id: string;
  sku: string;
  quantity: number;
  customerRef: string | null;
  status: 'placed' | 'cancelled';
  createdAt: string;
  cancelledAt: string | null;
  cancelReason: string | null;
}

/** What `createOrder` sends (`POST /v1/orders`). */
export interface CreateOrderFields {
  /** 1-64 of A-Z a-z 0-9 . _ - */
  sku: string;
  /** An integer 1-10,000. */
  quantity: number;
  /** Your own reference, unique per tenant forever. */
  customerRef?: string;
}

/** What `cancelOrder` sends (`POST /v1/orders/{id}/cancel`). */
export interface CancelOrderFields {
  /** 1-200 characters. */
  reason: string;
}

/** Operations that take an Idempotency-Key (the `{operation}` of a receipt). */
export type IdempotentOperation = 'orders.create' | 'orders.cancel';

/** What the service remembers for (your tenant, operation, key): `GET /v1/idempotency-receipts/{operation}/{key}`. */
export interface Receipt {
  operation: IdempotentOperation;
  key: string;
  /** `expired`: past `expiresAt`; the key no longer replays (it runs anew, or is refused while a tombstone lasts). */
  status: 'completed' | 'expired';
  /** The HTTP status the stored answer carries. */
  responseStatus: number;
  /** What the request changed; null for stored rejections (e.g. 404 order not found). */
  effect: { type: string; id: string } | null;
  region: string;
  fingerprintVersion: number;
  createdAt: string;
  completedAt: string;
  expiresAt: string;
  /** Until when an expired key is refused instead of running again (the operation's after-expiry option), or null. */
  tombstoneUntil?: string | null;
}

/** The answer of an idempotent command. */
export interface CommandOutcome<T> {
  value: T;
  /** The HTTP status (201 created, 200 cancelled). */
  status: number;
  /** The Idempotency-Key the action was sent with, on every attempt. */
  key: string;
  /** True when the service answered with the stored result of an earlier attempt (`Idempotent-Replayed: true`). */
  replayed: boolean;
  /** When the service forgets the key (`Idempotency-Expires`). */
  expiresAt?: Date;
  /** Requests sent for this action (1 when the first answer was final). */
  attempts: number;
  /**
   * True when an attempt's outcome was unknown (timeout, reset connection, 502/503/504) and the client
   * learned from the receipt that it had been applied before it asked for the stored answer.
   */
  resolvedFromReceipt: boolean;
  /** X-Request-Id of the final answer. */
  requestId?: string;
}
