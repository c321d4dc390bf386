import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateShipments1764720000000 implements MigrationInterface {
  name = 'CreateShipments1764720000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `
      CREATE TABLE shipments (
        id           uuid PRIMARY KEY,
        tenant_id    text NOT NULL,
        order_id     uuid NOT NULL,
        sku          text NOT NULL,
        quantity     integer NOT NULL CHECK (quantity > 0),
        status       text NOT NULL CHECK (status IN ('pending', 'cancelled')),
        message_id   uuid NOT NULL,
        created_at   timestamptz NOT NULL DEFAULT now(),
        cancelled_at timestamptz,
        UNIQUE (tenant_id, order_id)
      )`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP TABLE shipments`);
  }
}
