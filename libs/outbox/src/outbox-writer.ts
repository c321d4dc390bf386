import { Queryable, queryRows } from '@app/platform';
import { randomUUID } from 'node:crypto';
import { keyHash } from './key-hash';

/** The channel an idle relay LISTENs on. PostgreSQL delivers the notification only on commit. */
export const OUTBOX_CHANNEL = 'outbox_messages';

export interface OutboxEvent {
  topic: string;
  /** Kafka message key: the aggregate id, so one aggregate's events keep their order. */
  key: string;
  type: string;
  version: number;
  tenantId: string;
  payload: object;
  /** Extra Kafka headers, e.g. `traceparent`. */
  headers?: Record<string, string>;
}

/**
 * Enqueues `event` inside the caller's transaction (`db`) — the only way to enqueue. The row,
 * and so the event, exists only if that transaction commits. Returns the message id, stable forever.
 */
export async function addToOutbox(db: Queryable, event: OutboxEvent): Promise<string> {
  const messageId = randomUUID();
  await queryRows(
    db,
    /* sql */ `
    WITH enqueued AS (
      INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, headers)
      VALUES ($1, $2, $3, $9, $4, $5, $6, $7, $8)
      RETURNING id
    )
    SELECT pg_notify('${OUTBOX_CHANNEL}', '') FROM enqueued`,
    [
      messageId,
      event.topic,
      event.key,
      event.type,
      event.version,
      event.tenantId,
      JSON.stringify(event.payload),
      JSON.stringify(event.headers ?? {}),
      keyHash(event.key),
    ],
  );
  return messageId;
}
