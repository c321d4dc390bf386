/**
 * B5 relay peer: `pg-transactional-outbox` 0.5.7 in polling mode, run as a process of its own (as our
 * relay is), publishing its outbox to Kafka with the same kafkajs producer settings as our relay
 * (idempotent, acks -1, one request in flight). Configured as its README says: its own outbox table and
 * `next_outbox_messages` function (created by `setupPeerOutbox` with the library's own DatabaseSetup),
 * messages stored with the aggregate id as `segment` and `concurrency: 'sequential'`, the library's
 * way to keep one aggregate's messages in order (the function hands out only the oldest unprocessed
 * message of each segment). Its most favourable documented settings otherwise: batch 500, poll 10 ms,
 * lock 5,000 ms, and a batch-size strategy that asks for the full batch from the start (the default
 * asks for one message at a time for the first `batchSize` polls).
 *
 * What it does differently from our relay (read in its 0.5.7 source): one transaction and one Kafka
 * request per message (its handler gets one message), messages of a batch handled in parallel, no
 * NOTIFY wake-up (polling only), and a lock that expires (`locked_until`) instead of a shard owner.
 *
 * Child process: `node -r ts-node/register/transpile-only bench/peers/pg-transactional-outbox.ts`, with
 * PEER_DATABASE_URL, PEER_KAFKA_BROKERS, PEER_TOPIC; prints `ready` when polling, stops on SIGTERM.
 */
import { Client } from 'pg';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import {
  DatabaseSetup,
  GeneralMessageHandler,
  getDefaultLogger,
  initializePollingMessageListener,
  PollingListenerConfig,
  StoredTransactionalMessage,
} from 'pg-transactional-outbox';

export const PEER_TABLE = 'pgto_outbox';
const FUNCTION = 'next_pgto_outbox_messages';
export const PEER_BATCH_SIZE = 500;
export const PEER_POLL_MS = 10;
export const PEER_LOCK_MS = 5_000;

/** Creates the peer's table, indexes and polling function with the library's own SQL. */
export async function setupPeerOutbox(url: string): Promise<void> {
  const setup = {
    outboxOrInbox: 'outbox' as const,
    database: 'bench',
    schema: 'public',
    table: PEER_TABLE,
    listenerRole: 'postgres',
    nextMessagesName: FUNCTION,
  };
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(DatabaseSetup.dropAndCreateTable(setup));
    await client.query(DatabaseSetup.createPollingFunction(setup));
    await client.query(DatabaseSetup.setupPollingIndexes(setup));
  } finally {
    await client.end();
  }
}

async function main(): Promise<void> {
  const url = process.env.PEER_DATABASE_URL!;
  const topic = process.env.PEER_TOPIC!;
  const kafka = new Kafka({ clientId: 'pgto-peer', brokers: process.env.PEER_KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
  });
  await producer.connect();
  const publisher: GeneralMessageHandler = {
    handle: async (message: StoredTransactionalMessage) => {
      await producer.send({
        topic,
        acks: -1,
        messages: [
          { key: message.aggregateId, value: JSON.stringify(message.payload), headers: message.metadata as Record<string, string> },
        ],
      });
    },
  };
  const db = new URL(url);
  const connection = {
    host: db.hostname,
    port: Number(db.port || 5432),
    user: decodeURIComponent(db.username),
    database: db.pathname.slice(1),
  };
  const config: PollingListenerConfig = {
    outboxOrInbox: 'outbox',
    dbListenerConfig: connection,
    dbHandlerConfig: connection,
    settings: {
      dbSchema: 'public',
      dbTable: PEER_TABLE,
      nextMessagesFunctionName: FUNCTION,
      nextMessagesBatchSize: PEER_BATCH_SIZE,
      nextMessagesPollingIntervalInMs: PEER_POLL_MS,
      nextMessagesLockInMs: PEER_LOCK_MS,
      enableMaxAttemptsProtection: false,
      enablePoisonousMessageProtection: false,
      messageCleanupIntervalInMs: 0,
    },
  };
  // Warnings and errors only (each failed attempt is one), to stderr: the bench reports them.
  const logger = getDefaultLogger('pg-transactional-outbox');
  logger.level = 'warn';
  const [shutdown] = initializePollingMessageListener(config, publisher, logger, {
    batchSizeStrategy: () => Promise.resolve(PEER_BATCH_SIZE),
  });
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => {
    void shutdown()
      .then(() => producer.disconnect())
      .finally(() => process.exit(0));
  });
}

if (require.main === module) {
  main().catch((error) => {
    process.stderr.write(`${(error as Error).stack}\n`);
    process.exit(1);
  });
}
