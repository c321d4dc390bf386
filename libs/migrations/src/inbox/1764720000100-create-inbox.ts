import { MigrationInterface, QueryRunner } from 'typeorm';

/** The dedupe memory every consumer keeps in its own database (libs/inbox). */
export class CreateInbox1764720000100 implements MigrationInterface {
  name = 'CreateInbox1764720000100';

  async up(db: QueryRunner): Promise<void> {
    // One row per (consumer, message-id) it has handled: the effect and this row commit together.
    await db.query(/* sql */ `
      CREATE TABLE inbox_messages (
        consumer        text NOT NULL,
        message_id      uuid NOT NULL,
        topic           text NOT NULL,
        kafka_partition integer NOT NULL,
        kafka_offset    bigint NOT NULL,
        event_type      text,
        outcome         text NOT NULL CHECK (outcome IN ('applied', 'skipped', 'dead-lettered')),
        received_at     timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, message_id)
      )`);
    await db.query(/* sql */ `CREATE INDEX inbox_messages_received_idx ON inbox_messages (received_at)`);

    await db.query(/* sql */ `
      CREATE TABLE dead_letters (
        consumer         text NOT NULL,
        message_id       uuid NOT NULL,
        topic            text NOT NULL,
        kafka_partition  integer NOT NULL,
        kafka_offset     bigint NOT NULL,
        message_key      text,
        event_type       text,
        headers          jsonb NOT NULL,
        payload          text,
        error            text NOT NULL,
        attempts         integer NOT NULL,
        dead_lettered_at timestamptz NOT NULL DEFAULT now(),
        redriven_at      timestamptz,
        PRIMARY KEY (consumer, message_id)
      )`);

    // Each consumer publishes how long it remembers message-ids, so an outbox replay can refuse
    // a range it would no longer recognise.
    await db.query(/* sql */ `
      CREATE TABLE inbox_consumers (
        consumer          text PRIMARY KEY,
        retention_seconds integer NOT NULL,
        updated_at        timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP TABLE inbox_consumers`);
    await db.query(/* sql */ `DROP TABLE dead_letters`);
    await db.query(/* sql */ `DROP TABLE inbox_messages`);
  }
}
