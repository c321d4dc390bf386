import { IHeaders, Message } from 'kafkajs';
import { Headers } from '@app/contracts';
import { OutboxRow } from './relay-store';

/** Every header a consumer may rely on; `message-id` is the outbox row id, stable forever. */
export function toKafkaMessage(row: OutboxRow): Message {
  const headers: IHeaders = {
    ...row.headers,
    [Headers.messageId]: row.id,
    [Headers.eventType]: row.event_type,
    [Headers.eventVersion]: String(row.event_version),
    [Headers.tenantId]: row.tenant_id,
    [Headers.aggregateId]: row.message_key,
    [Headers.occurredAt]: row.created_at.toISOString(),
  };
  // Read as text, the payload goes out as PostgreSQL prints it: no parse and re-serialisation per row.
  return { key: row.message_key, value: row.payload_json ?? JSON.stringify(row.payload), headers };
}
