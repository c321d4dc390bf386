import { MigrationInterface, QueryRunner } from 'typeorm';

/** What the notifier delivered: one row per message-id, written only after the receiver answered 2xx. */
export class CreateWebhookDeliveries1764720000200 implements MigrationInterface {
  name = 'CreateWebhookDeliveries1764720000200';

  async up(db: QueryRunner): Promise<void> {
    // Committed in the same transaction as the notifier's inbox row (libs/inbox processOnce).
    await db.query(/* sql */ `
      CREATE TABLE webhook_deliveries (
        message_id   uuid PRIMARY KEY,
        tenant_id    text NOT NULL,
        order_id     uuid NOT NULL,
        url          text NOT NULL,
        status_code  integer NOT NULL CHECK (status_code BETWEEN 200 AND 299),
        attempts     integer NOT NULL CHECK (attempts > 0),
        delivered_at timestamptz NOT NULL DEFAULT now()
      )`);
    await db.query(/* sql */ `CREATE INDEX webhook_deliveries_tenant_idx ON webhook_deliveries (tenant_id, order_id)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP TABLE webhook_deliveries`);
  }
}
