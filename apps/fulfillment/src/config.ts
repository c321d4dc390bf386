import { z } from 'zod';
import { consumerConfig, consumerConfigRules } from '@app/inbox';
import { envFields } from '@app/platform';

export const fulfillmentConfig = z
  .object({
    NODE_ENV: envFields.nodeEnv,
    LOG_LEVEL: envFields.logLevel,
    SHUTDOWN_TIMEOUT_SECONDS: envFields.shutdownTimeoutSeconds,
    ...envFields.httpTimeouts,
    HOST: envFields.host,
    FULFILLMENT_PORT: envFields.port(3002),
    /** /metrics and /docs are served here, not on the app's port (firewall it like any internal port). */
    MANAGEMENT_PORT: envFields.port(3102),
    FULFILLMENT_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/fulfillment'),
    DATABASE_POOL_SIZE: envFields.poolSize,
    /** The consumer's settings (libs/inbox consumerConfig): KAFKA_BROKERS, INBOX_RETENTION_SECONDS, FULFILLMENT_MAX_ATTEMPTS, … */
    ...consumerConfig('FULFILLMENT', { maxAttempts: 5, retryMaxMs: 10_000 }),
  })
  .superRefine(consumerConfigRules('FULFILLMENT'));

export type FulfillmentConfig = z.infer<typeof fulfillmentConfig>;
