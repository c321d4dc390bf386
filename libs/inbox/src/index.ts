export * from './inbox';
export * from './inbox-consumer';
export * from './inbox-message';
export * from './dead-letters';
export * from './read-event';
export * from './consumer-kit';
