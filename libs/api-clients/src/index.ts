export * from './api-client.entity';
export * from './api-clients';
export * from './api-key';
