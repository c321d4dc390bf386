export * from './operations';
export * from './headers';
export * from './ids';
export * from './order-events';
export * from './topics';
export * from './webhooks';
export * from './order-event-schemas';
export * from './text';
