import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhook deliveries become the notifier's own outbox: the consumer records a `pending` delivery in
 * its inbox transaction and commits its offsets; the dispatcher POSTs it later, retries it on a
 * schedule and ends it `delivered` or `dead`. Rows from before were written after a 2xx: delivered.
 */
export class WebhookDeliveryQueue1764720000400 implements MigrationInterface {
  name = 'WebhookDeliveryQueue1764720000400';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `
      ALTER TABLE webhook_deliveries
        ADD COLUMN sequence        bigserial,
        ADD COLUMN event_type      text NOT NULL DEFAULT 'OrderPlaced',
        ADD COLUMN payload         text,
        ADD COLUMN state           text NOT NULL DEFAULT 'delivered' CHECK (state IN ('pending', 'delivered', 'dead')),
        ADD COLUMN next_attempt_at timestamptz,
        ADD COLUMN lease_id        uuid,
        ADD COLUMN leased_until    timestamptz,
        ADD COLUMN last_error      text,
        ADD COLUMN created_at      timestamptz NOT NULL DEFAULT now(),
        ADD COLUMN dead_at         timestamptz`);
    await db.query(
      /* sql */ `ALTER TABLE webhook_deliveries ALTER COLUMN event_type DROP DEFAULT, ALTER COLUMN state SET DEFAULT 'pending'`,
    );
    // status_code is the last answer (any status, or none yet); attempts start at 0; delivered_at is set on the 2xx.
    await db.query(/* sql */ `
      ALTER TABLE webhook_deliveries
        DROP CONSTRAINT IF EXISTS webhook_deliveries_status_code_check,
        DROP CONSTRAINT IF EXISTS webhook_deliveries_attempts_check,
        ALTER COLUMN status_code DROP NOT NULL,
        ALTER COLUMN delivered_at DROP NOT NULL,
        ALTER COLUMN delivered_at DROP DEFAULT,
        ALTER COLUMN attempts SET DEFAULT 0,
        ADD CONSTRAINT webhook_deliveries_attempts_check CHECK (attempts >= 0),
        ADD CONSTRAINT webhook_deliveries_pending_has_payload CHECK (state <> 'pending' OR (payload IS NOT NULL AND next_attempt_at IS NOT NULL)),
        ADD CONSTRAINT webhook_deliveries_delivered_has_time CHECK (state <> 'delivered' OR delivered_at IS NOT NULL)`);
    await db.query(/* sql */ `UPDATE webhook_deliveries SET created_at = delivered_at`);
    // The dispatcher's claim: due pending deliveries, and for each its order's earlier pending ones.
    await db.query(/* sql */ `CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE state = 'pending'`);
    await db.query(
      /* sql */ `CREATE INDEX webhook_deliveries_pending_order_idx ON webhook_deliveries (order_id, sequence) WHERE state = 'pending'`,
    );
    await db.query(/* sql */ `CREATE INDEX webhook_deliveries_dead_idx ON webhook_deliveries (dead_at) WHERE state = 'dead'`);
    await db.query(
      /* sql */ `CREATE INDEX webhook_deliveries_delivered_idx ON webhook_deliveries (delivered_at) WHERE state = 'delivered'`,
    );
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DELETE FROM webhook_deliveries WHERE state <> 'delivered'`);
    await db.query(/* sql */ `
      DROP INDEX webhook_deliveries_due_idx, webhook_deliveries_pending_order_idx, webhook_deliveries_dead_idx, webhook_deliveries_delivered_idx`);
    await db.query(/* sql */ `
      ALTER TABLE webhook_deliveries
        DROP CONSTRAINT webhook_deliveries_pending_has_payload,
        DROP CONSTRAINT webhook_deliveries_delivered_has_time,
        DROP CONSTRAINT webhook_deliveries_attempts_check,
        DROP COLUMN sequence, DROP COLUMN event_type, DROP COLUMN payload, DROP COLUMN state, DROP COLUMN next_attempt_at,
        DROP COLUMN lease_id, DROP COLUMN leased_until, DROP COLUMN last_error, DROP COLUMN created_at, DROP COLUMN dead_at,
        ALTER COLUMN status_code SET NOT NULL,
        ALTER COLUMN delivered_at SET NOT NULL,
        ALTER COLUMN delivered_at SET DEFAULT now(),
        ALTER COLUMN attempts DROP DEFAULT,
        ADD CONSTRAINT webhook_deliveries_attempts_check CHECK (attempts > 0),
        ADD CONSTRAINT webhook_deliveries_status_code_check CHECK (status_code BETWEEN 200 AND 299)`);
  }
}
