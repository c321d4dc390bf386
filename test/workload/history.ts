/** What the workload driver records: every HTTP exchange it had with the command API, as sent and as answered. */

export type Operation = 'orders.create' | 'orders.cancel';

/** Why the driver sent a request: a key's first use, a retry with the same fields, or a retry with changed fields. */
export type Intent = 'first' | 'retry' | 'changed' | 'resolve';

export interface Attempt {
  operation: Operation;
  key: string;
  intent: Intent;
  /** The declared fields sent: sku/quantity for a create, orderId/reason for a cancel. */
  fields: Record<string, string | number>;
  startedAt: number;
  endedAt: number;
  /** The HTTP status, or undefined when no answer came (timeout, reset connection). */
  status?: number;
  /** The order id the response named (body.id, or body.order.id for an already-cancelled 409). */
  orderId?: string;
  replayed: boolean;
  /** `Retry-After` on a 503 or 409, when there was one. */
  retryAfter?: string;
  error?: string;
}

/** What the receipt endpoint said about a key whose outcome the driver did not learn from a reply. */
export interface Resolution {
  operation: Operation;
  key: string;
  /** 200: a receipt (its stored status and effect); 404: nothing remembered. */
  lookupStatus: number;
  responseStatus?: number;
  effectId?: string;
}

export interface History {
  tenantId: string;
  attempts: Attempt[];
  resolutions: Resolution[];
}

/** A key of one operation: the logical action every attempt carrying it belongs to. */
export function actionId(operation: Operation, key: string): string {
  return `${operation} ${key}`;
}
