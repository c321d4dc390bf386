/** Event types and their versioned payloads. A consumer skips a version newer than it knows. */
export const OrderEventTypes = {
  placed: 'OrderPlaced',
  cancelled: 'OrderCancelled',
} as const;

export type OrderEventType = (typeof OrderEventTypes)[keyof typeof OrderEventTypes];

export interface OrderPlacedV1 {
  orderId: string;
  tenantId: string;
  sku: string;
  quantity: number;
  customerRef: string | null;
  placedAt: string;
}

export interface OrderCancelledV1 {
  orderId: string;
  tenantId: string;
  reason: string;
  cancelledAt: string;
}

export const ORDER_EVENT_VERSION = 1;
