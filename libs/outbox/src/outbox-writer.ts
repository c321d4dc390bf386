import { randomUUID } from 'node:crypto';
import { CarriedWrite, Queryable, queryRows } from '@app/platform';
import { keyHash } from './key-hash';

/**
 * The channel an idle relay LISTENs on. A trigger on outbox_messages NOTIFYs it for every statement
 * that inserts rows (migration 1764720000045); PostgreSQL delivers the notification only on commit.
 */
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

const COLUMNS = 9;

/**
 * The outbox rows of `events` as a write another statement of the same transaction carries (the
 * command path: with the receipt's completion), and their message ids, stable forever. The rows, and
 * so the events, exist only if that transaction commits, in the order given.
 */
export function outboxWrite(events: OutboxEvent[]): { write: CarriedWrite; messageIds: string[] } {
  const messageIds = events.map(() => randomUUID());
  const parameters = events.flatMap((event, i) => [
    messageIds[i],
    event.topic,
    event.key,
    keyHash(event.key),
    event.type,
    event.version,
    event.tenantId,
    JSON.stringify(event.payload),
    JSON.stringify(event.headers ?? {}),
  ]);
  const sql = (first: number) => /* sql */ `
    INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, headers)
    VALUES ${events.map((_, row) => `(${Array.from({ length: COLUMNS }, (_, column) => `$${first + row * COLUMNS + column}`).join(', ')})`).join(', ')}`;
  return { write: { name: 'enqueued', sql, parameters }, messageIds };
}

/**
 * Enqueues `event` inside the caller's transaction (`db`) on its own. Returns the message id.
 */
export async function addToOutbox(db: Queryable, event: OutboxEvent): Promise<string> {
  const { write, messageIds } = outboxWrite([event]);
  await queryRows(db, write.sql(1), write.parameters);
  return messageIds[0];
}
