/**
 * B5 consumer peer: the inbox of `pg-transactional-outbox` 0.5.7 in polling mode, run as a process of
 * its own (as fulfillment is), on the same backlog of OrderPlaced events, doing fulfillment's effect (a
 * shipment row per order). Configured as its README's inbox example says: a Kafka consumer stores each
 * message in the inbox table with the library's `initializeMessageStorage` (the message-id as the
 * primary key, ON CONFLICT DO NOTHING), and the library's polling listener hands each stored message to
 * a handler in a transaction of its own that also marks it processed. The README's max-attempts and
 * poisonous-message protections are on, as there. More favourable than the README where we could be:
 * one storing transaction per fetched batch instead of one per message, the consumer's fetch settings
 * as our baseline's (four partitions at a time), a full batch of 500 from the first poll, polling every
 * 10 ms, and `parallel` concurrency (no per-segment serialisation; each order has one event here).
 *
 * Child process: `node -r ts-node/register/transpile-only -r tsconfig-paths/register
 * bench/peers/pg-transactional-outbox-inbox.ts`, with PEER_DATABASE_URL and PEER_KAFKA_BROKERS; prints
 * `ready` as it connects to Kafka, stops on SIGTERM.
 */
import { Pool } from 'pg';
import { Kafka, logLevel } from 'kafkajs';
import {
  DatabaseClient,
  executeTransaction,
  initializeMessageStorage,
  initializePollingMessageListener,
  IsolationLevel,
  StoredTransactionalMessage,
  TransactionalMessageHandler,
} from 'pg-transactional-outbox';
import { Headers, OrderEventTypes, OrderPlacedV1, Topics } from '@app/contracts';
import { PARTITIONS_IN_PARALLEL } from '../bare-consumer';
import { PEER_BATCH_SIZE, peerLogger, peerPolling, runPeer, setupPeerTable } from './pg-transactional-outbox';

export const PEER_INBOX_TABLE = 'pgto_inbox';
export const PEER_INBOX_EFFECTS = 'pgto_shipments';
export const PEER_INBOX_GROUP = 'bench-pgto-inbox';
const FUNCTION = 'next_pgto_inbox_messages';

/** The peer's inbox table, indexes and polling function (the library's own SQL), and its effect table, shaped like fulfillment's. */
export function setupPeerInbox(url: string): Promise<void> {
  return setupPeerTable(
    url,
    'inbox',
    PEER_INBOX_TABLE,
    FUNCTION,
    /* sql */ `DROP TABLE IF EXISTS ${PEER_INBOX_EFFECTS}; CREATE TABLE ${PEER_INBOX_EFFECTS} (LIKE shipments INCLUDING ALL)`,
  );
}

async function main(): Promise<void> {
  const config = peerPolling('inbox', PEER_INBOX_TABLE, FUNCTION, true);
  const logger = peerLogger('pg-transactional-outbox-inbox');

  const shipment: TransactionalMessageHandler = {
    aggregateType: 'order',
    messageType: OrderEventTypes.placed,
    handle: async (message: StoredTransactionalMessage, client: DatabaseClient) => {
      const order = message.payload as OrderPlacedV1;
      await client.query(
        /* sql */ `
        INSERT INTO ${PEER_INBOX_EFFECTS} (id, tenant_id, order_id, sku, quantity, status, message_id)
        VALUES (gen_random_uuid(), $1, $2, $3, $4, 'pending', $5)
        ON CONFLICT (tenant_id, order_id) DO NOTHING`,
        [order.tenantId, order.orderId, order.sku, order.quantity, message.id],
      );
    },
  };
  const [shutdown] = initializePollingMessageListener(config, [shipment], logger, {
    batchSizeStrategy: () => Promise.resolve(PEER_BATCH_SIZE),
  });

  const pool = new Pool({ connectionString: process.env.PEER_DATABASE_URL, max: PARTITIONS_IN_PARALLEL });
  const store = initializeMessageStorage(config, logger);
  const kafka = new Kafka({ clientId: 'pgto-inbox-peer', brokers: process.env.PEER_KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: PEER_INBOX_GROUP, allowAutoTopicCreation: false, maxWaitTimeInMs: 1_000 });
  process.stdout.write('ready\n');
  await consumer.connect();
  await consumer.subscribe({ topic: Topics.orderEvents, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    partitionsConsumedConcurrently: PARTITIONS_IN_PARALLEL,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      if (!batch.messages.length) return;
      await executeTransaction(
        await pool.connect(),
        async (client) => {
          for (const message of batch.messages) {
            const header = (name: string) => message.headers![name]!.toString();
            await store(
              {
                id: header(Headers.messageId),
                aggregateType: 'order',
                aggregateId: header(Headers.aggregateId),
                messageType: header(Headers.eventType),
                payload: JSON.parse(message.value!.toString()),
                metadata: { tenantId: header(Headers.tenantId), occurredAt: header(Headers.occurredAt) },
                concurrency: 'parallel',
              },
              client,
            );
          }
        },
        IsolationLevel.ReadCommitted,
      );
      const last = batch.messages[batch.messages.length - 1].offset;
      await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() }]);
      resolveOffset(last);
      await heartbeat();
    },
  });
  process.once('SIGTERM', () => {
    void consumer
      .disconnect()
      .then(() => shutdown())
      .then(() => pool.end())
      .finally(() => process.exit(0));
  });
}

if (require.main === module) runPeer(main);
