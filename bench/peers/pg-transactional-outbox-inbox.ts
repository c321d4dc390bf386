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
import { Client, Pool } from 'pg';
import { Kafka, logLevel } from 'kafkajs';
import {
  DatabaseClient,
  DatabaseSetup,
  executeTransaction,
  getDefaultLogger,
  initializeMessageStorage,
  initializePollingMessageListener,
  IsolationLevel,
  PollingListenerConfig,
  StoredTransactionalMessage,
  TransactionalMessageHandler,
} from 'pg-transactional-outbox';
import { Headers, OrderEventTypes, OrderPlacedV1, Topics } from '@app/contracts';
import { PARTITIONS_IN_PARALLEL } from '../bare-consumer';
import { PEER_BATCH_SIZE, PEER_LOCK_MS, PEER_POLL_MS } from './pg-transactional-outbox';

export const PEER_INBOX_TABLE = 'pgto_inbox';
export const PEER_INBOX_EFFECTS = 'pgto_shipments';
export const PEER_INBOX_GROUP = 'bench-pgto-inbox';
const FUNCTION = 'next_pgto_inbox_messages';

/** The peer's inbox table, indexes and polling function (the library's own SQL), and its effect table, shaped like fulfillment's. */
export async function setupPeerInbox(url: string): Promise<void> {
  const setup = {
    outboxOrInbox: 'inbox' as const,
    database: 'bench',
    schema: 'public',
    table: PEER_INBOX_TABLE,
    listenerRole: 'postgres',
    nextMessagesName: FUNCTION,
  };
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(DatabaseSetup.dropAndCreateTable(setup));
    await client.query(DatabaseSetup.createPollingFunction(setup));
    await client.query(DatabaseSetup.setupPollingIndexes(setup));
    await client.query(/* sql */ `
      DROP TABLE IF EXISTS ${PEER_INBOX_EFFECTS};
      CREATE TABLE ${PEER_INBOX_EFFECTS} (LIKE shipments INCLUDING ALL)`);
  } finally {
    await client.end();
  }
}

async function main(): Promise<void> {
  const db = new URL(process.env.PEER_DATABASE_URL!);
  const connection = {
    host: db.hostname,
    port: Number(db.port || 5432),
    user: decodeURIComponent(db.username),
    database: db.pathname.slice(1),
  };
  const config: PollingListenerConfig = {
    outboxOrInbox: 'inbox',
    dbListenerConfig: connection,
    dbHandlerConfig: connection,
    settings: {
      dbSchema: 'public',
      dbTable: PEER_INBOX_TABLE,
      nextMessagesFunctionName: FUNCTION,
      nextMessagesBatchSize: PEER_BATCH_SIZE,
      nextMessagesPollingIntervalInMs: PEER_POLL_MS,
      nextMessagesLockInMs: PEER_LOCK_MS,
      enableMaxAttemptsProtection: true,
      enablePoisonousMessageProtection: true,
      messageCleanupIntervalInMs: 0,
    },
  };
  // Warnings and errors only (each failed attempt is one), to stderr: the bench reports them.
  const logger = getDefaultLogger('pg-transactional-outbox-inbox');
  logger.level = 'warn';

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

  const pool = new Pool({ ...connection, max: PARTITIONS_IN_PARALLEL });
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

if (require.main === module) {
  main().catch((error) => {
    process.stderr.write(`${(error as Error).stack}\n`);
    process.exit(1);
  });
}
