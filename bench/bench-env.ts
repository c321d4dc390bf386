/**
 * The bench's own database, dropped and recreated on every run: never `orders`, `orders_test` or
 * another. Import this module first: test/support/test-env.ts derives the URL that OrdersDb uses
 * from TEST_ORDERS_DATABASE_URL when it loads (the bench checks it did).
 */
export const benchOrdersUrl =
  process.env.BENCH_ORDERS_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/bench_orders';

process.env.TEST_ORDERS_DATABASE_URL = benchOrdersUrl;
