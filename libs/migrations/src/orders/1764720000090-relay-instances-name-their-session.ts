import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Each relay instance records the backend pid of the session that holds its shard locks, so that a live
 * instance can end the session of one gone silent (apps/outbox-relay, shard-ownership.ts): PostgreSQL
 * releases advisory locks only when their session ends, and the session of a frozen or cut-off process
 * can stay open for hours. Null for an instance of an older relay: never ended by a newer one.
 */
export class RelayInstancesNameTheirSession1764720000090 implements MigrationInterface {
  name = 'RelayInstancesNameTheirSession1764720000090';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `ALTER TABLE outbox_relay_instances ADD COLUMN backend_pid integer`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `ALTER TABLE outbox_relay_instances DROP COLUMN backend_pid`);
  }
}
