import { EntityManager } from 'typeorm';
import { Headers } from '@app/contracts';
import { queryRows } from '@app/platform';
import { remember } from './inbox';
import { InboxMessage } from './inbox-message';
import { diagnosticText, fromStoredContent, StoredContent, toStoredContent } from './stored-message';

/** A message a consumer gave up on (`dead_letters`), with the original key, value and headers (NULs and all). */
export interface DeadLetter {
  consumer: string;
  messageId: string;
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  eventType: string | null;
  headers: Record<string, string>;
  payload: string | null;
  error: string;
  attempts: number;
  deadLetteredAt: Date;
  redrivenAt: Date | null;
}

export interface DeadLetterFilter {
  consumer?: string;
  messageIds?: string[];
  /** Dead-lettered at or after. */
  since?: Date;
  includeRedriven?: boolean;
  limit: number;
}

interface DeadLetterRow {
  consumer: string;
  message_id: string;
  topic: string;
  kafka_partition: number;
  kafka_offset: string;
  message_key: string | null;
  event_type: string | null;
  headers: StoredContent['headers'];
  payload: string | null;
  error: string;
  attempts: number;
  dead_lettered_at: Date;
  redriven_at: Date | null;
}

const COLUMNS = /* sql */ `consumer, message_id, topic, kafka_partition, kafka_offset, message_key, event_type, headers, payload,
  error, attempts, dead_lettered_at, redriven_at`;

/**
 * Records a message the consumer gave up on, in the caller's transaction: its inbox row
 * (`dead-lettered`, so a redelivery is a duplicate) and its `dead_letters` row for ops to list and re-drive.
 * Whatever the message holds is storable (stored-message.ts): its key, value and headers as they came
 * (escaped when they hold a NUL), the error and event type with any NUL as U+FFFD.
 */
export async function recordDeadLetter(
  manager: EntityManager,
  consumer: string,
  message: InboxMessage & { messageId: string },
  error: string,
  attempts: number,
): Promise<void> {
  await remember(manager, consumer, message, 'dead-lettered');
  const stored = toStoredContent({ key: message.key, payload: message.value, headers: message.headers });
  await queryRows(
    manager,
    /* sql */ `
    INSERT INTO dead_letters (consumer, message_id, topic, kafka_partition, kafka_offset, message_key, event_type,
                              headers, payload, error, attempts)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
    ON CONFLICT (consumer, message_id) DO UPDATE
    SET topic = EXCLUDED.topic, kafka_partition = EXCLUDED.kafka_partition, kafka_offset = EXCLUDED.kafka_offset,
        message_key = EXCLUDED.message_key, event_type = EXCLUDED.event_type, headers = EXCLUDED.headers,
        payload = EXCLUDED.payload, error = EXCLUDED.error, attempts = EXCLUDED.attempts,
        dead_lettered_at = now(), redriven_at = NULL
    -- A re-driven message that failed again is open again; a redelivered one (crash before the offset commit) stays as recorded.
    WHERE dead_letters.redriven_at IS NOT NULL`,
    [
      consumer,
      message.messageId,
      message.topic,
      message.partition,
      message.offset,
      stored.key,
      diagnosticText(message.eventType ?? null),
      JSON.stringify(stored.headers),
      stored.payload,
      diagnosticText(error),
      attempts,
    ],
  );
}

/** Dead letters in this database, oldest first; re-driven ones only when asked for. */
export async function listDeadLetters(manager: EntityManager, filter: DeadLetterFilter): Promise<DeadLetter[]> {
  const { rows } = await queryRows<DeadLetterRow>(
    manager,
    /* sql */ `
    SELECT ${COLUMNS} FROM dead_letters
    WHERE ($1::text IS NULL OR consumer = $1)
      AND ($2::uuid[] IS NULL OR message_id = ANY($2::uuid[]))
      AND ($3::timestamptz IS NULL OR dead_lettered_at >= $3)
      AND ($4 OR redriven_at IS NULL)
    ORDER BY dead_lettered_at, consumer, message_id
    LIMIT $5`,
    [filter.consumer ?? null, filter.messageIds ?? null, filter.since ?? null, filter.includeRedriven ?? false, filter.limit],
  );
  return rows.map(toDeadLetter);
}

/**
 * Locks one dead letter in the caller's transaction (`FOR UPDATE`), so two re-drives of it queue and
 * the second sees the first's `redriven_at`. Null when there is none.
 */
export async function lockDeadLetter(manager: EntityManager, consumer: string, messageId: string): Promise<DeadLetter | null> {
  const { rows } = await queryRows<DeadLetterRow>(
    manager,
    /* sql */ `SELECT ${COLUMNS} FROM dead_letters WHERE consumer = $1 AND message_id = $2 FOR UPDATE`,
    [consumer, messageId],
  );
  return rows.length ? toDeadLetter(rows[0]) : null;
}

/**
 * Deletes the consumer's inbox row for a dead-lettered message, in the caller's transaction, so the
 * consumer handles the message again instead of skipping it as a duplicate. A row with any other
 * outcome (the message was handled after all) stays: the consumer keeps skipping that message-id.
 */
export async function forgetDeadLettered(manager: EntityManager, consumer: string, messageId: string): Promise<boolean> {
  const { affected } = await queryRows(
    manager,
    /* sql */ `DELETE FROM inbox_messages WHERE consumer = $1 AND message_id = $2 AND outcome = 'dead-lettered'`,
    [consumer, messageId],
  );
  return affected === 1;
}

/** Marks a dead letter re-driven in the caller's transaction; returns when. */
export async function markRedriven(manager: EntityManager, consumer: string, messageId: string): Promise<Date> {
  const { rows } = await queryRows<{ redriven_at: Date }>(
    manager,
    /* sql */ `UPDATE dead_letters SET redriven_at = now() WHERE consumer = $1 AND message_id = $2 RETURNING redriven_at`,
    [consumer, messageId],
  );
  return rows[0].redriven_at;
}

/**
 * False for a dead letter recorded under an id made from its Kafka coordinates (it carried no usable
 * `message-id`): published again, it would still have none, and no consumer could deduplicate it.
 */
export function carriesItsMessageId(letter: DeadLetter): boolean {
  return letter.headers[Headers.messageId]?.toLowerCase() === letter.messageId;
}

function toDeadLetter(row: DeadLetterRow): DeadLetter {
  const { key, payload, headers } = fromStoredContent({ key: row.message_key, payload: row.payload, headers: row.headers });
  return {
    consumer: row.consumer,
    messageId: row.message_id,
    topic: row.topic,
    partition: row.kafka_partition,
    offset: String(row.kafka_offset),
    key,
    eventType: row.event_type,
    headers,
    payload,
    error: row.error,
    attempts: row.attempts,
    deadLetteredAt: row.dead_lettered_at,
    redrivenAt: row.redriven_at,
  };
}
