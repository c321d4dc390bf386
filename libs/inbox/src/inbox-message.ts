import type { KafkaMessage } from 'kafkajs';
import { canonicalUuid, Headers } from '@app/contracts';

/** A Kafka message as a consumer handler sees it: coordinates, key, headers as strings, raw value. */
export interface InboxMessage {
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  headers: Record<string, string>;
  value: string | null;
  /** The `message-id` header: the dedupe key. Undefined when the producer sent none (malformed). */
  messageId?: string;
  eventType?: string;
}

/**
 * A header without a value (Kafka allows length -1; kafkajs reads it as null, and cannot send one) reads
 * as absent: a `message-id` without a value is no message-id, and the message is malformed.
 */
export function toInboxMessage(topic: string, partition: number, message: KafkaMessage): InboxMessage {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    // kafkajs types say never null; its decoder says otherwise (a repeated header's values too).
    const values = (Array.isArray(value) ? value : [value]).filter((one) => one !== undefined && one !== null);
    if (values.length) headers[name] = values.map(String).join(',');
  }
  return {
    topic,
    partition,
    offset: message.offset,
    key: message.key?.toString() ?? null,
    headers,
    value: message.value?.toString() ?? null,
    messageId: canonicalUuid(headers[Headers.messageId]),
    eventType: headers[Headers.eventType],
  };
}

/** A message that can never be handled as it is (bad payload, tenant mismatch): dead-lettered at once. */
export class MalformedMessage extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedMessage';
  }
}
