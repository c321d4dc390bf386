import { migrate } from '@app/migrations';
import { recreate } from './global-setup';
import { PrivatePostgres } from './private-postgres';
import { testEnv } from './test-env';

export interface PrivateDatabases {
  ordersUrl: string;
  fulfillmentUrl: string;
  notifierUrl: string;
  /** The variables that point an app or the ops CLI at these databases. */
  env: Record<string, string>;
}

/** `…/orders_test` -> `…/orders_<suffix>_test`, on the shared test server or on `server`. */
function privateUrl(url: string, suffix: string, server?: PrivatePostgres): string {
  const target = new URL(url);
  target.pathname = target.pathname.replace(/_test$/, `_${suffix}_test`);
  return server ? server.url(decodeURIComponent(target.pathname.slice(1))) : target.toString();
}

/**
 * Orders, fulfillment and notifier databases of one suite's own, created and migrated from nothing:
 * for a suite that must own every row (an audit of whole tables) or rewrites a whole database
 * (restores a dump), without seeing or breaking what other suites left in the shared test databases.
 * With `server`, they live on that PostgreSQL server of the suite's own instead of the shared one.
 */
export async function privateDatabases(suffix: string, server?: PrivatePostgres): Promise<PrivateDatabases> {
  const urls = {
    ordersUrl: privateUrl(testEnv.ordersUrl, suffix, server),
    fulfillmentUrl: privateUrl(testEnv.fulfillmentUrl, suffix, server),
    notifierUrl: privateUrl(testEnv.notifierUrl, suffix, server),
  };
  for (const [name, url] of [
    ['orders', urls.ordersUrl],
    ['fulfillment', urls.fulfillmentUrl],
    ['notifier', urls.notifierUrl],
  ] as const) {
    await recreate(url);
    await migrate(name, url);
  }
  return {
    ...urls,
    env: { ORDERS_DATABASE_URL: urls.ordersUrl, FULFILLMENT_DATABASE_URL: urls.fulfillmentUrl, NOTIFIER_DATABASE_URL: urls.notifierUrl },
  };
}
