import { MigrationInterface, QueryRunner } from 'typeorm';

/** The reference webhook receiver (apps/webhook-receiver): one row per webhook-id it accepted. */
export class CreateReceivedWebhooks1764720000500 implements MigrationInterface {
  name = 'CreateReceivedWebhooks1764720000500';

  async up(db: QueryRunner): Promise<void> {
    // The primary key is the dedupe: a retried delivery inserts nothing (ON CONFLICT DO NOTHING).
    await db.query(/* sql */ `
      CREATE TABLE received_webhooks (
        webhook_id  text PRIMARY KEY,
        event_type  text NOT NULL,
        tenant_id   text NOT NULL,
        order_id    uuid NOT NULL,
        payload     jsonb NOT NULL,
        signed_at   timestamptz NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP TABLE received_webhooks`);
  }
}
