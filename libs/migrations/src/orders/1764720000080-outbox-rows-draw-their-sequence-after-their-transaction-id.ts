import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every statement that inserts outbox rows has its transaction id before it draws a sequence: a
 * BEFORE ... FOR EACH STATEMENT trigger fires before the statement computes its first row, and so
 * before the identity's default draws the row's number. A transaction otherwise gets its id only when
 * it first writes a row, after the draw; in between, no snapshot lists it as running, yet it may still
 * commit a row numbered below rows already committed. The relay's claim floor (libs/outbox,
 * claim-floor.ts) may pass a number only once every transaction that could still commit a row below
 * it has ended, which it can tell only of transactions with an id. A property of the table rather than
 * of each writer, as the NOTIFY of migration 045 is; it costs nothing to a writer that has written
 * before in its transaction (the command path claims its receipt first).
 */
export class OutboxRowsDrawTheirSequenceAfterTheirTransactionId1764720000080 implements MigrationInterface {
  name = 'OutboxRowsDrawTheirSequenceAfterTheirTransactionId1764720000080';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `
      CREATE FUNCTION outbox_messages_take_transaction_id() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_current_xact_id();
        RETURN NULL;
      END $$`);
    await db.query(/* sql */ `
      CREATE TRIGGER outbox_messages_take_transaction_id BEFORE INSERT ON outbox_messages
      FOR EACH STATEMENT EXECUTE FUNCTION outbox_messages_take_transaction_id()`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP TRIGGER outbox_messages_take_transaction_id ON outbox_messages`);
    await db.query(/* sql */ `DROP FUNCTION outbox_messages_take_transaction_id()`);
  }
}
