/**
 * The bench's own databases, dropped and recreated on every run: never `orders`, `orders_test` or
 * another. Import this module first: test/support/test-env.ts derives the URLs that its helpers use
 * from TEST_*_DATABASE_URL when it loads (the bench checks it did).
 */
export const benchOrdersUrl = process.env.BENCH_ORDERS_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/bench_orders';
export const benchFulfillmentUrl = process.env.BENCH_FULFILLMENT_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/bench_fulfillment';
export const benchNotifierUrl = process.env.BENCH_NOTIFIER_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/bench_notifier';
export const benchReceiverUrl =
  process.env.BENCH_WEBHOOK_RECEIVER_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/bench_webhook_receiver';

/** The command-api as `commands` and `instructions` run it: production mode, warnings only, on the bench database. */
export const apiEnv = {
  NODE_ENV: 'production',
  LOG_LEVEL: 'warn',
  ORDERS_DATABASE_URL: benchOrdersUrl,
  READINESS_REQUIRES_KAFKA: 'false',
  DATABASE_POOL_SIZE: '10',
};

process.env.TEST_ORDERS_DATABASE_URL = benchOrdersUrl;
process.env.TEST_FULFILLMENT_DATABASE_URL = benchFulfillmentUrl;
process.env.TEST_NOTIFIER_DATABASE_URL = benchNotifierUrl;
process.env.TEST_WEBHOOK_RECEIVER_DATABASE_URL = benchReceiverUrl;
