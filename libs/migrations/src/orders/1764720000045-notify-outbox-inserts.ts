import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every statement that inserts outbox rows NOTIFYs `outbox_messages`, delivered when its transaction
 * commits (PostgreSQL folds a transaction's identical notifications into one): an idle relay wakes at
 * once. A property of the table rather than of each writer's SQL, so a writer can carry its rows in
 * another statement (the command path inserts them with the receipt's completion, one round trip).
 */
export class NotifyOutboxInserts1764720000045 implements MigrationInterface {
  name = 'NotifyOutboxInserts1764720000045';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `
      CREATE FUNCTION notify_outbox_messages() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('outbox_messages', '');
        RETURN NULL;
      END $$`);
    await db.query(/* sql */ `
      CREATE TRIGGER outbox_messages_inserted AFTER INSERT ON outbox_messages
      FOR EACH STATEMENT EXECUTE FUNCTION notify_outbox_messages()`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP TRIGGER outbox_messages_inserted ON outbox_messages`);
    await db.query(/* sql */ `DROP FUNCTION notify_outbox_messages()`);
  }
}
