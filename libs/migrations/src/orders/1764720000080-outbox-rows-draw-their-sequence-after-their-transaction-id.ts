import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * An outbox row draws its sequence only once its transaction has an id: the column's default is a
 * function that takes the id (`pg_current_xact_id()`), then draws. PostgreSQL otherwise gives a
 * transaction its id when it writes its first row, after the default drew the number; in between it
 * is in no snapshot, yet it may still commit a row numbered below rows already committed. The relay's
 * claim floor (libs/outbox, claim-floor.ts) may pass a number only once every transaction that could
 * still commit a row below it has ended, which it can tell only of transactions with an id.
 *
 * Per row, not per statement (a BEFORE ... FOR EACH STATEMENT trigger would also do it): a statement
 * that inserts no row, as a replayed command's carried write, takes no id, so its read-only transaction
 * still commits without a WAL flush. The identity column becomes a plain column with that default on a
 * sequence of the same name, continuing above every number drawn; the table is locked meanwhile, so
 * no writer draws in between. A property of the table rather than of each writer, as migration 045's
 * NOTIFY is; free for a writer that wrote before in its transaction (the command path's receipt).
 */
export class OutboxRowsDrawTheirSequenceAfterTheirTransactionId1764720000080 implements MigrationInterface {
  name = 'OutboxRowsDrawTheirSequenceAfterTheirTransactionId1764720000080';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `LOCK TABLE outbox_messages IN ACCESS EXCLUSIVE MODE`);
    const [{ next }] = await db.query(/* sql */ `SELECT nextval(pg_get_serial_sequence('outbox_messages', 'sequence'))::text AS next`);
    await db.query(/* sql */ `ALTER TABLE outbox_messages ALTER COLUMN sequence DROP IDENTITY`);
    await db.query(/* sql */ `CREATE SEQUENCE outbox_messages_sequence_seq AS bigint OWNED BY outbox_messages.sequence`);
    await db.query(/* sql */ `SELECT setval('outbox_messages_sequence_seq', $1)`, [next]);
    await db.query(/* sql */ `
      CREATE FUNCTION outbox_messages_next_sequence() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
      BEGIN
        PERFORM pg_current_xact_id();
        RETURN nextval('outbox_messages_sequence_seq');
      END $$`);
    await db.query(/* sql */ `ALTER TABLE outbox_messages ALTER COLUMN sequence SET DEFAULT outbox_messages_next_sequence()`);
  }

  /** Back to an identity column, continuing above every number drawn. */
  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `LOCK TABLE outbox_messages IN ACCESS EXCLUSIVE MODE`);
    const [{ next }] = await db.query(/* sql */ `SELECT nextval('outbox_messages_sequence_seq')::text AS next`);
    await db.query(/* sql */ `ALTER TABLE outbox_messages ALTER COLUMN sequence DROP DEFAULT`);
    await db.query(/* sql */ `DROP FUNCTION outbox_messages_next_sequence()`);
    await db.query(/* sql */ `DROP SEQUENCE outbox_messages_sequence_seq`);
    await db.query(
      /* sql */ `ALTER TABLE outbox_messages ALTER COLUMN sequence ADD GENERATED ALWAYS AS IDENTITY (START WITH ${BigInt(next) + 1n})`,
    );
  }
}
