import { DataSource, EntityManager } from 'typeorm';
import { BatchedDelete, deleteInBatches, inTransaction, Queryable, queryRows } from '@app/platform';
import { fromHandler } from './failure-kind';
import { InboxMessage } from './inbox-message';
import { diagnosticText } from './stored-message';

/** `applied`: the handler changed state; `skipped`: understood but not for this consumer (unknown type, newer version). */
export type HandlerOutcome = 'applied' | 'skipped';
export type InboxOutcome = HandlerOutcome | 'duplicate';

/**
 * Applies the effects of `messages` — the new ones of a batch, in their order on the partition — inside
 * the consumer's transaction (`db`: its connection; run statements with `queryRows`), and says for each
 * whether it changed state. Throw to roll the batch back; `MalformedMessage` when retrying cannot help.
 * Errors of its own outside calls count as attempts, even when they look like a lost connection (see
 * `OutsideFailure`).
 *
 * A batch's messages arrive together so that the handler can write them in a few set-based statements
 * rather than a few statements per message: the round trips were most of a consumer's CPU.
 */
export type InboxHandler = (db: Queryable, messages: InboxMessage[]) => Promise<HandlerOutcome[]>;

/**
 * Runs `handler` once per (consumer, message-id), for a batch, in ONE transaction of the consumer's
 * own database: the inbox rows are inserted in one statement and the handler gets only the messages
 * whose row is new, or was `skipped` (rememberAll). The inbox rows and the effects commit together, or
 * neither does; a message-id handled before (a relay republish, a replay, a redelivery after a crash),
 * or twice in the batch, comes back `duplicate`. Commit the Kafka offsets only after this resolves.
 */
export function processOnce(
  dataSource: DataSource,
  consumer: string,
  messages: InboxMessage[],
  handler: InboxHandler,
): Promise<InboxOutcome[]> {
  return inTransaction(dataSource, async (db) => {
    const fresh = await rememberAll(db, consumer, messages);
    const news = messages.filter((_, i) => fresh[i]);
    const handled = news.length
      ? await handler(db, news).catch((error: unknown) => {
          throw fromHandler(error);
        })
      : [];
    if (handled.length !== news.length)
      throw new Error(`the ${consumer} handler returned ${handled.length} outcomes for ${news.length} messages`);
    const skipped = news.filter((_, i) => handled[i] === 'skipped').map((message) => message.messageId!);
    if (skipped.length) await setOutcome(db, consumer, skipped, 'skipped');
    let next = 0;
    return messages.map((_, i) => (fresh[i] ? handled[next++] : 'duplicate'));
  });
}

/**
 * The conflict rule of every inbox insert: a message-id the consumer has a row for is a duplicate,
 * unless that row says `skipped`. A consumer that did not understand the message then may now (a replay
 * after an upgrade): the row is taken over, with the new outcome, and remembered from now.
 */
const UNLESS_HANDLED = /* sql */ `
    ON CONFLICT (consumer, message_id) DO UPDATE
    SET topic = EXCLUDED.topic, kafka_partition = EXCLUDED.kafka_partition, kafka_offset = EXCLUDED.kafka_offset,
        event_type = EXCLUDED.event_type, outcome = EXCLUDED.outcome, received_at = now()
    WHERE inbox_messages.outcome = 'skipped'`;

/**
 * Inserts the inbox rows of a batch in one statement; for each message, whether it is to be handled:
 * its row is new, or says `skipped` (UNLESS_HANDLED; handled again, it is skipped again or applied).
 * Only the first of two messages with one message-id in the batch can be: the second is a duplicate.
 * The event type is only read by people: a NUL in it (which text cannot hold) is stored as U+FFFD.
 */
async function rememberAll(db: Queryable, consumer: string, messages: InboxMessage[]): Promise<boolean[]> {
  const first = new Map<string, number>();
  messages.forEach((message, i) => {
    if (!first.has(message.messageId!)) first.set(message.messageId!, i);
  });
  const candidates = [...first.values()].map((i) => messages[i]);
  const { rows } = await queryRows<{ message_id: string }>(
    db,
    /* sql */ `
    INSERT INTO inbox_messages (consumer, message_id, topic, kafka_partition, kafka_offset, event_type, outcome)
    SELECT $1, m.message_id, m.topic, m.kafka_partition, m.kafka_offset, m.event_type, 'applied'
    FROM unnest($2::uuid[], $3::text[], $4::int[], $5::bigint[], $6::text[]) AS m(message_id, topic, kafka_partition, kafka_offset, event_type)
    ${UNLESS_HANDLED}
    RETURNING message_id`,
    [
      consumer,
      candidates.map((m) => m.messageId),
      candidates.map((m) => m.topic),
      candidates.map((m) => m.partition),
      candidates.map((m) => m.offset),
      candidates.map((m) => diagnosticText(m.eventType ?? null)),
    ],
  );
  const inserted = new Set(rows.map((row) => row.message_id));
  return messages.map((message, i) => first.get(message.messageId!) === i && inserted.has(message.messageId!));
}

/** Inserts one inbox row; false when this consumer already handled the message-id (UNLESS_HANDLED). */
export async function remember(
  db: Queryable,
  consumer: string,
  message: InboxMessage,
  outcome: HandlerOutcome | 'dead-lettered',
): Promise<boolean> {
  const { rows } = await queryRows(
    db,
    /* sql */ `
    INSERT INTO inbox_messages (consumer, message_id, topic, kafka_partition, kafka_offset, event_type, outcome)
    VALUES ($1, $2, $3, $4, $5, $6, $7)
    ${UNLESS_HANDLED}
    RETURNING message_id`,
    [consumer, message.messageId, message.topic, message.partition, message.offset, diagnosticText(message.eventType ?? null), outcome],
  );
  return rows.length === 1;
}

async function setOutcome(db: Queryable, consumer: string, messageIds: string[], outcome: string): Promise<void> {
  await queryRows(db, /* sql */ `UPDATE inbox_messages SET outcome = $3 WHERE consumer = $1 AND message_id = ANY($2::uuid[])`, [
    consumer,
    messageIds,
    outcome,
  ]);
}

/** Publishes this consumer's dedupe retention where an outbox replay can read it. */
export async function declareRetention(manager: EntityManager, consumer: string, retentionSeconds: number): Promise<void> {
  await queryRows(
    manager,
    /* sql */ `
    INSERT INTO inbox_consumers (consumer, retention_seconds) VALUES ($1, $2)
    ON CONFLICT (consumer) DO UPDATE SET retention_seconds = EXCLUDED.retention_seconds, updated_at = now()`,
    [consumer, retentionSeconds],
  );
}

export interface DeclaredRetention {
  consumer: string;
  retentionSeconds: number;
}

/** Every consumer registered in this database (`inbox_consumers`) with the retention it declared. */
export async function declaredRetentions(manager: EntityManager): Promise<DeclaredRetention[]> {
  const { rows } = await queryRows<{ consumer: string; retention_seconds: number }>(
    manager,
    /* sql */ `SELECT consumer, retention_seconds FROM inbox_consumers ORDER BY consumer`,
  );
  return rows.map((row) => ({ consumer: row.consumer, retentionSeconds: row.retention_seconds }));
}

/** A consumer's inbox rows past its retention (`$1` consumer, `$2` seconds): the only rows a sweep may delete. */
const FORGETTABLE = /* sql */ `consumer = $1 AND received_at < now() - make_interval(secs => $2)`;

/** How many rows `sweepInbox` would delete now. */
export async function countForgettable(manager: EntityManager, { consumer, retentionSeconds }: DeclaredRetention): Promise<number> {
  const { rows } = await queryRows<{ n: string }>(manager, /* sql */ `SELECT count(*) AS n FROM inbox_messages WHERE ${FORGETTABLE}`, [
    consumer,
    retentionSeconds,
  ]);
  return Number(rows[0].n);
}

/**
 * Forgets message-ids older than the retention, batch after batch (each its own short statement) until
 * none is left: the retention is what the table holds, however fast messages come. After this, a
 * replay of such a message would apply again: that is why replays must not reach past the smallest
 * inbox retention.
 */
export async function sweepInbox(
  manager: EntityManager,
  { consumer, retentionSeconds, ...batches }: { consumer: string; retentionSeconds: number } & BatchedDelete,
): Promise<number> {
  return deleteInBatches(
    manager,
    /* sql */ `
    DELETE FROM inbox_messages WHERE (consumer, message_id) IN (
      SELECT consumer, message_id FROM inbox_messages
      WHERE ${FORGETTABLE}
      LIMIT $3
      FOR UPDATE SKIP LOCKED
    )`,
    [consumer, retentionSeconds],
    batches,
  );
}
