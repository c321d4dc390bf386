/**
 * End-to-end suites run against their own databases and their own Kafka broker (29092, started by
 * scripts/test-infra.sh), never the ones `npm start` uses: a test run leaves nothing on the topics
 * the running apps consume.
 *
 * `npm test` runs three jest workers side by side (TEST_WORKERS). Each worker has a world of its own,
 * so suites in different workers never see each other: its own databases (worker 1 the names below,
 * worker n `orders_w<n>_test` and so on, all made by global-setup.ts) and its own broker
 * (TEST_KAFKA_BROKERS_<n>, started by test-infra.sh), with the service's fixed topic names and
 * consumer groups. TEST_* variables let CI point them elsewhere; the app variables are derived from them.
 */
export const baseEnv = {
  ordersUrl: process.env.TEST_ORDERS_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/orders_test',
  fulfillmentUrl: process.env.TEST_FULFILLMENT_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/fulfillment_test',
  notifierUrl: process.env.TEST_NOTIFIER_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/notifier_test',
  receiverUrl: process.env.TEST_WEBHOOK_RECEIVER_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/webhook_receiver_test',
  kafkaBrokers: process.env.TEST_KAFKA_BROKERS ?? '127.0.0.1:29092',
};

/** Worker `n`'s copy of a test database: `<name>_w<n>_test` (worker 1 keeps the name). */
export function workerDatabaseUrl(url: string, worker: number): string {
  if (worker <= 1) return url;
  const target = new URL(url);
  target.pathname = target.pathname.replace(/_test$/, `_w${worker}_test`);
  return target.toString();
}

/** Worker `n`'s broker: TEST_KAFKA_BROKERS for the first, TEST_KAFKA_BROKERS_<n> for the others. */
function workerBrokers(worker: number): string {
  if (worker <= 1) return baseEnv.kafkaBrokers;
  const brokers = process.env[`TEST_KAFKA_BROKERS_${worker}`];
  if (!brokers) {
    throw new Error(
      `jest worker ${worker} has no broker of its own: TEST_KAFKA_BROKERS_${worker} is not set. Run the suites with npm test ` +
        `(it starts one broker per worker), or with --runInBand.`,
    );
  }
  return brokers;
}

const worker = Number(process.env.JEST_WORKER_ID ?? '1');

export const testEnv = {
  ordersUrl: workerDatabaseUrl(baseEnv.ordersUrl, worker),
  fulfillmentUrl: workerDatabaseUrl(baseEnv.fulfillmentUrl, worker),
  notifierUrl: workerDatabaseUrl(baseEnv.notifierUrl, worker),
  receiverUrl: workerDatabaseUrl(baseEnv.receiverUrl, worker),
  kafkaBrokers: workerBrokers(worker),
};

process.env.NODE_ENV = 'test';
process.env.LOG_LEVEL = process.env.TEST_LOG_LEVEL ?? 'silent';
process.env.ORDERS_DATABASE_URL = testEnv.ordersUrl;
process.env.FULFILLMENT_DATABASE_URL = testEnv.fulfillmentUrl;
process.env.NOTIFIER_DATABASE_URL = testEnv.notifierUrl;
process.env.WEBHOOK_RECEIVER_DATABASE_URL = testEnv.receiverUrl;
process.env.KAFKA_BROKERS = testEnv.kafkaBrokers;
