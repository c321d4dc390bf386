export { OrdersClient } from './orders-client';
export type { CallOptions, OrdersClientOptions, RetryEvent } from './orders-client';
export * from './errors';
export { ProblemTypes } from './problems';
export type { Problem, ProblemType } from './problems';
export { defaultRetryPolicy } from './retry';
export type { RetryPolicy } from './retry';
export type { CancelOrderFields, CommandOutcome, CreateOrderFields, IdempotentOperation, Order, Receipt } from './types';
export { checkContract } from './contract';
