export * from './operations';
export * from './headers';
export * from './order-events';
export * from './topics';
