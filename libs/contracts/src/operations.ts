/** Stable operation ids: part of the idempotency scope and of each API client's permissions. Never rename. */
export const Operations = {
  createOrder: 'orders.create',
  cancelOrder: 'orders.cancel',
  readOrders: 'orders.read',
} as const;

export type Operation = (typeof Operations)[keyof typeof Operations];

export const allOperations: readonly Operation[] = Object.values(Operations);

/** Operations that take an `Idempotency-Key` and remember their result. */
export const idempotentOperations: readonly Operation[] = [Operations.createOrder, Operations.cancelOrder];

export function isOperation(value: string): value is Operation {
  return (allOperations as readonly string[]).includes(value);
}
