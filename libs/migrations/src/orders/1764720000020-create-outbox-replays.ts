import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateOutboxReplays1764720000020 implements MigrationInterface {
  name = 'CreateOutboxReplays1764720000020';

  async up(db: QueryRunner): Promise<void> {
    // One row per `ops outbox:replay`: what it selects (filters and range as the operator gave them, frozen at
    // selected_at) and how far it got, so an interrupted replay continues where Kafka last acknowledged.
    await db.query(/* sql */ `
      CREATE TABLE outbox_replays (
        id             uuid PRIMARY KEY,
        from_sequence  bigint,
        to_sequence    bigint,
        from_time      timestamptz,
        to_time        timestamptz,
        topic          text,
        tenant_id      text,
        message_key    text,
        -- Rows published after this instant are the relay's (the broker was back): never part of the replay.
        selected_at    timestamptz NOT NULL,
        selected       integer NOT NULL,
        forced         boolean NOT NULL DEFAULT false,
        created_at     timestamptz NOT NULL DEFAULT now(),
        updated_at     timestamptz NOT NULL DEFAULT now(),
        finished_at    timestamptz,
        -- The highest sequence Kafka has acknowledged; a resume starts after it.
        last_sequence  bigint,
        published      integer NOT NULL DEFAULT 0
      )`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP TABLE outbox_replays`);
  }
}
