/**
 * End-to-end suites run against their own databases and their own Kafka broker (29092, started by
 * scripts/test-infra.sh), never the ones `npm start` uses: a test run leaves nothing on the topics
 * the running apps consume.
 * TEST_* variables let CI point them elsewhere; the app variables are derived from them.
 */
export const testEnv = {
  ordersUrl: process.env.TEST_ORDERS_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/orders_test',
  fulfillmentUrl: process.env.TEST_FULFILLMENT_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/fulfillment_test',
  notifierUrl: process.env.TEST_NOTIFIER_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/notifier_test',
  receiverUrl: process.env.TEST_WEBHOOK_RECEIVER_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/webhook_receiver_test',
  kafkaBrokers: process.env.TEST_KAFKA_BROKERS ?? '127.0.0.1:29092',
};

process.env.NODE_ENV = 'test';
process.env.LOG_LEVEL = process.env.TEST_LOG_LEVEL ?? 'silent';
process.env.ORDERS_DATABASE_URL = testEnv.ordersUrl;
process.env.FULFILLMENT_DATABASE_URL = testEnv.fulfillmentUrl;
process.env.NOTIFIER_DATABASE_URL = testEnv.notifierUrl;
process.env.WEBHOOK_RECEIVER_DATABASE_URL = testEnv.receiverUrl;
process.env.KAFKA_BROKERS = testEnv.kafkaBrokers;
