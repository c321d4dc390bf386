export * from './fingerprint';
export * from './idempotency.error';
export * from './receipt-queries';
export * from './receipt-store';
export * from './replay-cache';
export * from './run-idempotent';
export * from './scope';
