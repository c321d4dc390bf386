import { MigrationInterface, QueryRunner } from 'typeorm';
import { NotifyOutboxInserts1764720000045 } from './1764720000045-notify-outbox-inserts';

/**
 * The outbox trigger NOTIFYs only for a statement that inserted rows. A decided command carries its
 * outbox rows on a condition (they are written only if its claim succeeded): a replay answered by
 * that statement inserts none, and must wake no relay. The statement's new rows are its transition
 * table, so a bulk insert still costs one notification.
 */
export class NotifyOnlyWhenOutboxRowsAreInserted1764720000060 implements MigrationInterface {
  name = 'NotifyOnlyWhenOutboxRowsAreInserted1764720000060';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `
      CREATE OR REPLACE FUNCTION notify_outbox_messages() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT FROM inserted) THEN
          PERFORM pg_notify('outbox_messages', '');
        END IF;
        RETURN NULL;
      END $$`);
    await db.query(/* sql */ `DROP TRIGGER outbox_messages_inserted ON outbox_messages`);
    await db.query(/* sql */ `
      CREATE TRIGGER outbox_messages_inserted AFTER INSERT ON outbox_messages
      REFERENCING NEW TABLE AS inserted
      FOR EACH STATEMENT EXECUTE FUNCTION notify_outbox_messages()`);
  }

  /** Back to migration 045's trigger, which NOTIFYs for every inserting statement. */
  async down(db: QueryRunner): Promise<void> {
    await new NotifyOutboxInserts1764720000045().down(db);
    await new NotifyOutboxInserts1764720000045().up(db);
  }
}
