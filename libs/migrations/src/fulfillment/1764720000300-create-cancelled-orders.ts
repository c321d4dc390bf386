import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What fulfillment knows of an order cancelled before its shipment existed (its OrderPlaced was
 * dead-lettered, or is late): a late OrderPlaced then records the shipment as cancelled, never pending.
 */
export class CreateCancelledOrders1764720000300 implements MigrationInterface {
  name = 'CreateCancelledOrders1764720000300';

  async up(db: QueryRunner): Promise<void> {
    // Kept for good: an OrderPlaced may come back by a re-drive or replay any time later.
    await db.query(/* sql */ `
      CREATE TABLE cancelled_orders (
        tenant_id    text NOT NULL,
        order_id     uuid NOT NULL,
        cancelled_at timestamptz NOT NULL DEFAULT now(),
        message_id   uuid NOT NULL,
        PRIMARY KEY (tenant_id, order_id)
      )`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP TABLE cancelled_orders`);
  }
}
