export * from './outbox-writer';
export * from './key-hash';
export * from './relay-store';
export * from './claim-floor';
export * from './kafka-message';
export * from './outbox-status';
