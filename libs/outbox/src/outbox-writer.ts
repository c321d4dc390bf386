import { randomUUID } from 'node:crypto';
import { CarriedWrite, carriedInsert, carriedParameters, Queryable, queryRows } from '@app/platform';
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

/** outbox_messages' columns an event fills, with their types (created_at and the rest keep their defaults). */
const COLUMNS = [
  ['id', 'uuid'],
  ['topic', 'text'],
  ['message_key', 'text'],
  ['key_hash', 'bigint'],
  ['event_type', 'text'],
  ['event_version', 'smallint'],
  ['tenant_id', 'text'],
  ['payload', 'jsonb'],
  ['headers', 'jsonb'],
] as const;

/**
 * The outbox rows of `events` as a write another statement of the same transaction carries (the
 * command path: with the receipt), and their message ids, stable forever. The rows, and so the
 * events, exist only if that transaction commits (and the carrying statement's condition holds), in
 * the order given.
 */
export function outboxWrite(events: OutboxEvent[]): { write: CarriedWrite; messageIds: string[] } {
  const messageIds = events.map(() => randomUUID());
  const rows = events.map((event, i) => [
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
  return { write: { name: 'enqueued', table: 'outbox_messages', columns: COLUMNS, rows }, messageIds };
}

/**
 * Enqueues `event` inside the caller's transaction (`db`) on its own. Returns the message id.
 */
export async function addToOutbox(db: Queryable, event: OutboxEvent): Promise<string> {
  const { write, messageIds } = outboxWrite([event]);
  await queryRows(db, carriedInsert(write, 1), carriedParameters(write));
  return messageIds[0];
}
