/**
 * B5 relay peer: `pg-transactional-outbox` 0.5.7 in polling mode, run as a process of its own (as our
 * relay is), publishing its outbox to Kafka with the same kafkajs producer settings as our relay
 * (idempotent, acks -1, one request in flight, the relay's partitioner). Configured as its README says: its own outbox table and
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
import { Kafka, logLevel } from 'kafkajs';
import {
  DatabaseSetup,
  GeneralMessageHandler,
  getDefaultLogger,
  initializePollingMessageListener,
  PollingListenerConfig,
  StoredTransactionalMessage,
} from 'pg-transactional-outbox';
import { javaCompatiblePartitioner } from '../../libs/platform/src/kafka/partitioner';

export const PEER_TABLE = 'pgto_outbox';
const FUNCTION = 'next_pgto_outbox_messages';
export const PEER_BATCH_SIZE = 500;
export const PEER_POLL_MS = 10;
export const PEER_LOCK_MS = 5_000;

/** Creates the peer's table, indexes and polling function with the library's own SQL. */
export function setupPeerOutbox(url: string): Promise<void> {
  return setupPeerTable(url, 'outbox', PEER_TABLE, FUNCTION);
}

/** A table of the library's, its indexes and its polling function `nextMessagesName`, made with its own SQL; then `more`. */
export async function setupPeerTable(
  url: string,
  outboxOrInbox: 'outbox' | 'inbox',
  table: string,
  nextMessagesName: string,
  more?: string,
): Promise<void> {
  const setup = { outboxOrInbox, database: 'bench', schema: 'public', table, listenerRole: 'postgres', nextMessagesName };
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(DatabaseSetup.dropAndCreateTable(setup));
    await client.query(DatabaseSetup.createPollingFunction(setup));
    await client.query(DatabaseSetup.setupPollingIndexes(setup));
    if (more) await client.query(more);
  } finally {
    await client.end();
  }
}

/** The polling listener's settings both peer processes use: the most favourable documented ones, full batches from the first poll. */
export function peerPolling(
  outboxOrInbox: 'outbox' | 'inbox',
  table: string,
  nextMessagesFunctionName: string,
  protections: boolean,
): PollingListenerConfig {
  const db = new URL(process.env.PEER_DATABASE_URL!);
  const connection = {
    host: db.hostname,
    port: Number(db.port || 5432),
    user: decodeURIComponent(db.username),
    database: db.pathname.slice(1),
  };
  return {
    outboxOrInbox,
    dbListenerConfig: connection,
    dbHandlerConfig: connection,
    settings: {
      dbSchema: 'public',
      dbTable: table,
      nextMessagesFunctionName,
      nextMessagesBatchSize: PEER_BATCH_SIZE,
      nextMessagesPollingIntervalInMs: PEER_POLL_MS,
      nextMessagesLockInMs: PEER_LOCK_MS,
      enableMaxAttemptsProtection: protections,
      enablePoisonousMessageProtection: protections,
      messageCleanupIntervalInMs: 0,
    },
  };
}

/** Warnings and errors only (each failed attempt is one), to stderr: the bench reports them. */
export function peerLogger(name: string) {
  const logger = getDefaultLogger(name);
  logger.level = 'warn';
  return logger;
}

/** Runs a peer process's `main`; a failure is its stack on stderr and exit code 1. */
export function runPeer(main: () => Promise<void>): void {
  main().catch((error) => {
    process.stderr.write(`${(error as Error).stack}\n`);
    process.exit(1);
  });
}

async function main(): Promise<void> {
  const topic = process.env.PEER_TOPIC!;
  const kafka = new Kafka({ clientId: 'pgto-peer', brokers: process.env.PEER_KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: javaCompatiblePartitioner, // the relay's (orderedProducer's)
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
  const [shutdown] = initializePollingMessageListener(
    peerPolling('outbox', PEER_TABLE, FUNCTION, false),
    publisher,
    peerLogger('pg-transactional-outbox'),
    {
      batchSizeStrategy: () => Promise.resolve(PEER_BATCH_SIZE),
    },
  );
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => {
    void shutdown()
      .then(() => producer.disconnect())
      .finally(() => process.exit(0));
  });
}

if (require.main === module) runPeer(main);
