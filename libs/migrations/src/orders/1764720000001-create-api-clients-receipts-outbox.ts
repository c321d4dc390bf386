import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateApiClientsReceiptsOutbox1764720000001 implements MigrationInterface {
  name = 'CreateApiClientsReceiptsOutbox1764720000001';

  async up(db: QueryRunner): Promise<void> {
    // Only a SHA-256 of each key is kept: a leaked table cannot be replayed as credentials.
    await db.query(/* sql */ `
      CREATE TABLE api_clients (
        id                 uuid PRIMARY KEY,
        tenant_id          text NOT NULL,
        name               text NOT NULL,
        allowed_operations text[] NOT NULL,
        key_sha256         bytea NOT NULL UNIQUE,
        created_at         timestamptz NOT NULL DEFAULT now(),
        revoked_at         timestamptz
      )`);

    // The scope is the composite key, column by column; never one concatenated string.
    await db.query(/* sql */ `
      CREATE TABLE idempotency_receipts (
        tenant_id           text NOT NULL,
        operation           text NOT NULL,
        idempotency_key     text NOT NULL,
        fingerprint         text NOT NULL,
        fingerprint_version smallint NOT NULL,
        region              text NOT NULL,
        response_status     smallint,
        response_headers    jsonb,
        response_body       json, -- json, not jsonb: the replay is byte-for-byte the original body
        effect_type         text,
        effect_id           text,
        created_at          timestamptz NOT NULL DEFAULT now(),
        completed_at        timestamptz,
        expires_at          timestamptz NOT NULL,
        PRIMARY KEY (tenant_id, operation, idempotency_key)
      )`);
    await db.query(/* sql */ `CREATE INDEX idempotency_receipts_expires_idx ON idempotency_receipts (expires_at)`);

    // The row id is the Kafka message-id, stable forever; sequence orders rows, never as a watermark.
    await db.query(/* sql */ `
      CREATE TABLE outbox_messages (
        id            uuid PRIMARY KEY,
        sequence      bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        topic         text NOT NULL,
        message_key   text NOT NULL,
        -- FNV-1a of message_key, computed by the writer: relays own shards of it (key_hash mod shards).
        key_hash      bigint NOT NULL,
        event_type    text NOT NULL,
        event_version smallint NOT NULL,
        tenant_id     text NOT NULL,
        payload       jsonb NOT NULL,
        headers       jsonb NOT NULL DEFAULT '{}',
        created_at    timestamptz NOT NULL DEFAULT now(),
        published_at  timestamptz,
        attempts      integer NOT NULL DEFAULT 0,
        last_error    text,
        -- Set when Kafka refused the message itself (e.g. too large): later rows of its key wait for an operator.
        parked_at     timestamptz
      )`);
    await db.query(/* sql */ `
      CREATE INDEX outbox_messages_unpublished_idx ON outbox_messages (sequence) WHERE published_at IS NULL`);
    await db.query(/* sql */ `CREATE INDEX outbox_messages_aggregate_idx ON outbox_messages (tenant_id, message_key)`);
    await db.query(/* sql */ `CREATE INDEX outbox_messages_published_idx ON outbox_messages (published_at) WHERE published_at IS NOT NULL`);
    await db.query(/* sql */ `CREATE INDEX outbox_messages_parked_idx ON outbox_messages (message_key) WHERE parked_at IS NOT NULL`);

    // Live relay instances and the shards each owns (ownership itself is a PostgreSQL advisory lock per shard).
    await db.query(/* sql */ `
      CREATE TABLE outbox_relay_instances (
        instance_id  text PRIMARY KEY,
        started_at   timestamptz NOT NULL DEFAULT now(),
        heartbeat_at timestamptz NOT NULL DEFAULT now(),
        shards       integer[] NOT NULL DEFAULT '{}',
        last_publish_at timestamptz
      )`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP TABLE outbox_relay_instances`);
    await db.query(/* sql */ `DROP TABLE outbox_messages`);
    await db.query(/* sql */ `DROP TABLE idempotency_receipts`);
    await db.query(/* sql */ `DROP TABLE api_clients`);
  }
}
