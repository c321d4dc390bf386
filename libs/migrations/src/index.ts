import { DataSource } from 'typeorm';
import { postgresOptions } from '@app/platform';
import { CreateOrders1764720000000 } from './orders/1764720000000-create-orders';
import { CreateApiClientsReceiptsOutbox1764720000001 } from './orders/1764720000001-create-api-clients-receipts-outbox';
import { CreateOutboxReplays1764720000020 } from './orders/1764720000020-create-outbox-replays';
import { IndexOrdersByTime1764720000030 } from './orders/1764720000030-index-orders-by-time';
import { NotifyApiClientChanges1764720000040 } from './orders/1764720000040-notify-api-client-changes';
import { NotifyOutboxInserts1764720000045 } from './orders/1764720000045-notify-outbox-inserts';
import { ReceiptTombstones1764720000050 } from './orders/1764720000050-receipt-tombstones';
import { NotifyOnlyWhenOutboxRowsAreInserted1764720000060 } from './orders/1764720000060-notify-only-when-outbox-rows-are-inserted';
import { OutboxVacuumsCleanItsIndexes1764720000070 } from './orders/1764720000070-outbox-vacuums-clean-its-indexes';
import { OutboxRowsDrawTheirSequenceAfterTheirTransactionId1764720000080 } from './orders/1764720000080-outbox-rows-draw-their-sequence-after-their-transaction-id';
import { RelayInstancesNameTheirSession1764720000090 } from './orders/1764720000090-relay-instances-name-their-session';
import { CreateShipments1764720000000 } from './fulfillment/1764720000000-create-shipments';
import { CreateCancelledOrders1764720000300 } from './fulfillment/1764720000300-create-cancelled-orders';
import { CreateInbox1764720000100 } from './inbox/1764720000100-create-inbox';
import { CreateWebhookDeliveries1764720000200 } from './notifier/1764720000200-create-webhook-deliveries';
import { WebhookDeliveryQueue1764720000400 } from './notifier/1764720000400-webhook-delivery-queue';
import { WebhookQueueVacuumsCleanItsIndexes1764720000410 } from './notifier/1764720000410-webhook-queue-vacuums-clean-its-indexes';
import { WebhookQueueIndexesNameTheirColumns1764720000420 } from './notifier/1764720000420-webhook-queue-indexes-name-their-columns';
import { CreateReceivedWebhooks1764720000500 } from './receiver/1764720000500-create-received-webhooks';

/** Each database owns its migrations; the order of each list is the order they apply in. */
export const migrationSets = {
  orders: [
    CreateOrders1764720000000,
    CreateApiClientsReceiptsOutbox1764720000001,
    CreateOutboxReplays1764720000020,
    IndexOrdersByTime1764720000030,
    NotifyApiClientChanges1764720000040,
    NotifyOutboxInserts1764720000045,
    ReceiptTombstones1764720000050,
    NotifyOnlyWhenOutboxRowsAreInserted1764720000060,
    OutboxVacuumsCleanItsIndexes1764720000070,
    OutboxRowsDrawTheirSequenceAfterTheirTransactionId1764720000080,
    RelayInstancesNameTheirSession1764720000090,
  ],
  fulfillment: [CreateShipments1764720000000, CreateInbox1764720000100, CreateCancelledOrders1764720000300],
  notifier: [
    CreateInbox1764720000100,
    CreateWebhookDeliveries1764720000200,
    WebhookDeliveryQueue1764720000400,
    WebhookQueueVacuumsCleanItsIndexes1764720000410,
    WebhookQueueIndexesNameTheirColumns1764720000420,
  ],
  /** The reference webhook receiver's own database (apps/webhook-receiver), standing in for a downstream team's. */
  receiver: [CreateReceivedWebhooks1764720000500],
} as const;

export type DatabaseName = keyof typeof migrationSets;

/** How long a migrator queued behind another waits before it asks for the lock again. */
const LOCK_RETRY_MS = 200;

/**
 * Applies the pending migrations of `database` at `url`, each in its own transaction; returns their names.
 * Racing migrators queue: each applies what the ones before it left; `onWaiting` is called once if this
 * one has to wait.
 */
export async function migrate(database: DatabaseName, url: string, onWaiting?: () => void): Promise<string[]> {
  const dataSource = new DataSource(
    postgresOptions({ url, applicationName: `migrate-${database}`, migrations: [...migrationSets[database]], poolSize: 1 }),
  );
  await dataSource.initialize();
  try {
    // Pool size 1: the advisory lock and the migrations share one session.
    await lockMigrations(dataSource, onWaiting);
    const applied = await dataSource.runMigrations({ transaction: 'each' });
    return applied.map((migration) => migration.name);
  } finally {
    await dataSource.destroy();
  }
}

/**
 * Takes the session's migration lock, trying again every LOCK_RETRY_MS while another session holds it,
 * with no bound (as a wait inside `pg_advisory_lock` had none). Not that wait: a migrator queued inside a
 * statement holds a snapshot, CREATE INDEX CONCURRENTLY in the holder's migrations waits for every older
 * snapshot, and PostgreSQL failed one of the two with a deadlock. Between its tries this session is idle.
 */
async function lockMigrations(dataSource: DataSource, onWaiting?: () => void): Promise<void> {
  for (let tries = 0; ; tries++) {
    const [{ locked }] = await dataSource.query(/* sql */ `SELECT pg_try_advisory_lock(hashtext('typeorm_migrations')) AS locked`);
    if (locked) return;
    if (tries === 0) onWaiting?.();
    await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_MS));
  }
}
