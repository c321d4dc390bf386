import { EntityManager } from 'typeorm';
import { queryRows } from '@app/platform';

/** A relay instance silent for this many heartbeat intervals is gone: its shards are up for grabs. */
export const HEARTBEATS_BEFORE_GONE = 3;

export interface RelayInstance {
  instanceId: string;
  shards: number[];
  startedAt: Date;
  heartbeatAgeSeconds: number;
  lastPublishAt: Date | null;
}

/** The relay instances that announced themselves (`outbox_relay_instances`), most recent heartbeat first. */
export async function relayInstances(manager: EntityManager): Promise<RelayInstance[]> {
  const { rows } = await queryRows<{
    instance_id: string;
    shards: number[];
    started_at: Date;
    heartbeat_age: number;
    last_publish_at: Date | null;
  }>(
    manager,
    /* sql */ `
    SELECT instance_id, shards, started_at, extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age, last_publish_at
    FROM outbox_relay_instances ORDER BY heartbeat_at DESC, instance_id`,
  );
  return rows.map((row) => ({
    instanceId: row.instance_id,
    shards: [...row.shards].sort((a, b) => a - b),
    startedAt: row.started_at,
    heartbeatAgeSeconds: row.heartbeat_age,
    lastPublishAt: row.last_publish_at,
  }));
}

/**
 * When a row was last published: the latest `published_at` still in the outbox, or the latest a relay
 * reported with its heartbeat (the cleanup may already have deleted every published row).
 */
export async function lastPublishAt(manager: EntityManager): Promise<Date | null> {
  const { rows } = await queryRows<{ at: Date | null }>(
    manager,
    /* sql */ `
    SELECT greatest(
      (SELECT max(published_at) FROM outbox_messages WHERE published_at IS NOT NULL),
      (SELECT max(last_publish_at) FROM outbox_relay_instances)
    ) AS at`,
  );
  return rows[0].at;
}

export interface ParkedMessage {
  id: string;
  topic: string;
  key: string;
  eventType: string;
  tenantId: string;
  createdAt: Date;
  parkedAt: Date;
  attempts: number;
  lastError: string | null;
}

/** The oldest parked (Kafka-refused, unpublished) rows: each holds back the later rows of its key. */
export async function parkedMessages(manager: EntityManager, limit: number): Promise<ParkedMessage[]> {
  const { rows } = await queryRows<{
    id: string;
    topic: string;
    message_key: string;
    event_type: string;
    tenant_id: string;
    created_at: Date;
    parked_at: Date;
    attempts: number;
    last_error: string | null;
  }>(
    manager,
    /* sql */ `
    SELECT id, topic, message_key, event_type, tenant_id, created_at, parked_at, attempts, last_error
    FROM outbox_messages
    WHERE parked_at IS NOT NULL AND published_at IS NULL
    ORDER BY parked_at, sequence
    LIMIT $1`,
    [limit],
  );
  return rows.map((row) => ({
    id: row.id,
    topic: row.topic,
    key: row.message_key,
    eventType: row.event_type,
    tenantId: row.tenant_id,
    createdAt: row.created_at,
    parkedAt: row.parked_at,
    attempts: row.attempts,
    lastError: row.last_error,
  }));
}
