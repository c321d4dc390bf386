import { randomUUID } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import { migrate } from '@app/migrations';
import { notifierDatabase } from '../../apps/notifier/src/database';
import { claimDue, settle } from '../../apps/notifier/src/webhooks/delivery-store';
import { recreate } from './global-setup';
import { testEnv } from './test-env';

/**
 * A notifier database of the suite's own (`notifier_<name>_test`), migrated, on a pool the notifier's
 * sessions are (`notifierDatabase`), with autovacuum off on the webhook queue so that its dead entries
 * stay until the test vacuums; destroyed after the suite. Returns the data source (set once the
 * suite's beforeAll ran).
 */
export function deliveriesOfTheirOwn(
  name: string,
  seed: (dataSource: DataSource) => Promise<void> = async () => undefined,
): () => DataSource {
  let dataSource: DataSource;
  beforeAll(async () => {
    const target = new URL(testEnv.notifierUrl);
    target.pathname = target.pathname.replace(/_test$/, `_${name}_test`);
    const url = target.toString();
    await recreate(url);
    await migrate('notifier', url);
    dataSource = await new DataSource(notifierDatabase({ url, poolSize: 2 })).initialize();
    await dataSource.query(/* sql */ `ALTER TABLE webhook_deliveries SET (autovacuum_enabled = false)`);
    await seed(dataSource);
  }, 90_000);
  afterAll(async () => {
    await dataSource?.destroy();
  });
  return () => dataSource;
}

/**
 * Delivers every due delivery with the dispatcher's own claim and settle, `batch` at a time, each at
 * its first attempt (a 204); returns how many.
 */
export async function deliverAllDue(manager: EntityManager, batch: number): Promise<number> {
  let delivered = 0;
  for (;;) {
    const claimed = await claimDue(manager, randomUUID(), 60_000, batch);
    if (!claimed.length) return delivered;
    delivered += await settle(manager, deliveredAtFirstAttempt(claimed));
  }
}

/** The settlements of `claimed` deliveries that the receiver took at their first attempt (a 204). */
export function deliveredAtFirstAttempt(claimed: { messageId: string; leaseId: string }[]) {
  return claimed.map(({ messageId, leaseId }) => ({
    messageId,
    leaseId,
    url: 'http://127.0.0.1:1/hook',
    state: 'delivered' as const,
    statusCode: 204,
    retryInMs: null,
    error: null,
  }));
}
