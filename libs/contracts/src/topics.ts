/** Kafka topics this service owns. Names are part of the downstream contract: never rename, add new ones. */
export const Topics = {
  /** Order lifecycle events, keyed by order id so one order's events stay in order. */
  orderEvents: 'orders.order-events.v1',
  /** Messages a consumer gave up on after its bounded attempts, with the error in headers. */
  deadLetters: 'orders.dead-letters.v1',
} as const;
