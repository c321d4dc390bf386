/**
 * `npm run bench -- latency`: how long after an order commits its effect exists in fulfillment, with the
 * whole chain running as `npm start` runs it (command-api, outbox-relay, fulfillment; the notifier with
 * `--notifier`) on the bench's databases and the bench's broker, at a steady rate of `POST /v1/orders`.
 *
 * Per order: fulfillment's shipment `created_at` minus the order's `created_at`, both read on the same
 * PostgreSQL server. The order's is the command-api's clock as it places the order, just before its
 * transaction begins (one host clock here), the shipment's `now()`, the start of its transaction: this
 * codebase stores no commit time (the receipt's `completed_at` and the outbox row's `created_at` are
 * `now()` of the order's transaction, and `track_commit_timestamp` is off). The command transaction is a few
 * milliseconds long and fulfillment's at this rate too, so start-to-start is within those few ms of
 * commit-to-commit. The HTTP reply (after the commit, on the same host clock) gives a lower bound.
 * Each message's Kafka timestamp (the relay's producer sets it as it sends; read by an observer group)
 * splits the latency into the relay's share and fulfillment's.
 *
 * Baseline in the same run: the bare path for the same messages at the same rate: a bare kafkajs
 * producer (the relay's settings) sends each OrderPlaced as it is due, and a bare eachBatch consumer
 * (bench/bare-consumer.ts) applies it; latency from just before the send to its shipment's `created_at`.
 * Exit 0 when every order got exactly one effect, 1 otherwise, 2 on bad usage.
 */
import { benchFulfillmentUrl, benchNotifierUrl, benchOrdersUrl } from './bench-env'; // first: it points test/support at the bench databases
import { randomUUID } from 'node:crypto';
import { Kafka } from 'kafkajs';
import { Pool } from 'pg';
import { Headers, OrderEventTypes, OrderPlacedV1, Topics } from '@app/contracts';
import { orderedProducer } from '@app/platform';
import { RunningApp, startApp } from '../test/support/apps';
import { buildForTests } from '../test/support/build';
import { ensureServiceTopics, skipConsumerBacklog, testKafka } from '../test/support/kafka';
import { OrdersDb } from '../test/support/orders-db';
import { WebhookReceiver } from '../test/support/webhook-receiver';
import { BARE_GROUP, BareConsumer, createBareTables, PARTITIONS_IN_PARALLEL } from './bare-consumer';
import { describeServer, prepareBenchDatabases } from './bench-database';
import { describeMachine, Machine, runAsMain } from './cli';
import { KeepAliveClient, percentile } from './load';
import { benchArgs, integerFlag } from './options';
import { BenchResult, BenchSection } from './section';

const progress = (text: string) => process.stderr.write(`bench: ${text}\n`);
const CONNECTIONS = 64;
const TICK_MS = 10;
const WARMUP_SECONDS = 5;
/** How long the broker holds the observer's fetch (it is answered when this passes, with what it has). */
const OBSERVER_WAIT_MS = 1_000;

interface Options {
  rate: number;
  seconds: number;
  notifier: boolean;
  json: boolean;
}

export const usage =
  'usage: npm run bench -- latency [--rate N/s (1-5000, default 200)] [--seconds N (1-3600, default 60)] [--notifier] [--json]';

function parseOptions(argv: string[]): Options {
  const values = benchArgs(argv, { rate: { type: 'string' }, seconds: { type: 'string' }, notifier: { type: 'boolean', default: false } });
  return {
    rate: integerFlag('--rate', values.rate, 200, 1, 5_000),
    seconds: integerFlag('--seconds', values.seconds, 60, 1, 3_600),
    notifier: values.notifier,
    json: values.json,
  };
}

/** Calls `fire(i)` for i = 0, 1, … at `rate` per second for `seconds`, without waiting for any (an open loop). */
async function atRate(rate: number, seconds: number, fire: (i: number) => Promise<unknown>): Promise<void> {
  const pending: Promise<unknown>[] = [];
  const started = Date.now();
  for (let tick = 0, fired = 0; Date.now() - started < seconds * 1000; tick++) {
    const due = Math.min(Math.floor(((tick + 1) * TICK_MS * rate) / 1000), rate * seconds);
    for (; fired < due; fired++) pending.push(fire(fired));
    const wait = started + (tick + 1) * TICK_MS - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
  await Promise.all(pending);
}

/** Polls until `count()` reaches `n` or `timeoutMs` passed; the last count. */
async function until(count: () => Promise<number>, n: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const have = await count();
    if (have >= n || Date.now() > deadline) return have;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface Latencies {
  name: string;
  measures: string;
  sent: number;
  withEffect: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
}

function summarise(name: string, measures: string, sent: number, values: number[]): Latencies {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    name,
    measures,
    sent,
    withEffect: values.length,
    p50Ms: percentile(sorted, 0.5),
    p95Ms: percentile(sorted, 0.95),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted[sorted.length - 1] ?? NaN,
  };
}

/** Epoch milliseconds (with microseconds) of a timestamptz column, as SQL. */
const epochMs = (column: string) => `1000 * extract(epoch FROM ${column})::float8`;

/**
 * The bare path: a bare producer sends each OrderPlaced when it is due; the bare consumer applies it.
 * Latency from just before the send (this process's clock) to its shipment's `created_at` (the
 * database's): one host, one clock.
 */
async function barePath(kafka: Kafka, pool: Pool, options: Options, problems: string[]): Promise<Latencies> {
  await skipConsumerBacklog(kafka, [BARE_GROUP], Topics.orderEvents);
  const consumer = new BareConsumer(kafka, pool);
  const producer = orderedProducer(kafka);
  await producer.connect();
  await consumer.start();
  try {
    const sentAt = new Map<string, number>();
    const send = (tenantId: string) => () => {
      const orderId = randomUUID();
      const placedAt = new Date().toISOString();
      const payload: OrderPlacedV1 = { orderId, tenantId, sku: 'BENCH-1', quantity: 1, customerRef: null, placedAt };
      sentAt.set(orderId, performance.timeOrigin + performance.now());
      return producer.send({
        topic: Topics.orderEvents,
        acks: -1,
        messages: [
          {
            key: orderId,
            value: JSON.stringify(payload),
            headers: {
              [Headers.messageId]: randomUUID(),
              [Headers.eventType]: OrderEventTypes.placed,
              [Headers.eventVersion]: '1',
              [Headers.tenantId]: tenantId,
              [Headers.aggregateId]: orderId,
              [Headers.occurredAt]: placedAt,
            },
          },
        ],
      });
    };
    const count = (tenantId: string) => async () =>
      (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM bare_shipments WHERE tenant_id = $1', [tenantId])).rows[0].n;

    const warmup = `bench-bare-warmup-${randomUUID().slice(0, 8)}`;
    progress(`bare path: warming up (${WARMUP_SECONDS} s at ${options.rate}/s)`);
    await atRate(options.rate, WARMUP_SECONDS, send(warmup));
    await until(count(warmup), options.rate * WARMUP_SECONDS, 60_000);

    const tenantId = `bench-bare-${randomUUID().slice(0, 8)}`;
    const sent = options.rate * options.seconds;
    progress(`bare path: ${options.rate} messages/s for ${options.seconds} s`);
    sentAt.clear();
    await atRate(options.rate, options.seconds, send(tenantId));
    const have = await until(count(tenantId), sent, 60_000);
    if (have !== sent) problems.push(`bare path: ${have} effects for ${sent} messages`);
    const { rows } = await pool.query<{ order_id: string; at: number }>(
      `SELECT order_id::text, ${epochMs('created_at')} AS at FROM bare_shipments WHERE tenant_id = $1`,
      [tenantId],
    );
    return summarise(
      'bare path (baseline)',
      'bare producer -> Kafka -> bare eachBatch consumer: from the send to the effect',
      sent,
      rows.map((row) => row.at - sentAt.get(row.order_id)!),
    );
  } finally {
    await consumer.stop();
    await producer.disconnect();
  }
}

interface Chain {
  fromCommit: Latencies;
  fromReply: Latencies;
  /** The POST itself, as its client saw it: sent -> 201 received. */
  command: Latencies;
  /** Order transaction -> the message's Kafka timestamp (the relay's producer sending it). */
  toKafka: Latencies;
  /** The Kafka timestamp -> the effect: the consumer's share. */
  kafkaToEffect: Latencies;
  unexpectedReplies: number;
}

/**
 * Records each order event's Kafka timestamp (set by the relay's producer when it sends) by order id,
 * from a group of its own, to split the latency into the relay's share and the consumer's.
 */
async function observeSends(
  kafka: Kafka,
): Promise<{ sentAt: Map<string, number>; caughtUp(keys: string[]): Promise<void>; stop(): Promise<void> }> {
  const sentAt = new Map<string, number>();
  // The timestamps are the producer's, so reading them late changes nothing: the broker answers this
  // group once a second with all it has (minBytes is never reached at these rates), instead of once
  // per message as a waiting consumer is answered. Fetched message by message, the observer cost the
  // broker and the bench process CPU the chain under test competes for, which the bare path never pays.
  const consumer = kafka.consumer({
    groupId: `bench-latency-observer-${randomUUID().slice(0, 8)}`,
    minBytes: 1024 * 1024,
    maxWaitTimeInMs: OBSERVER_WAIT_MS,
  });
  await consumer.connect();
  await consumer.subscribe({ topic: Topics.orderEvents, fromBeginning: false });
  let joined!: () => void;
  const ready = new Promise<void>((resolve) => (joined = resolve));
  consumer.on(consumer.events.GROUP_JOIN, () => joined());
  await consumer.run({
    eachBatch: async ({ batch }) => {
      for (const message of batch.messages) if (message.key) sentAt.set(message.key.toString(), Number(message.timestamp));
    },
  });
  await ready;
  const caughtUp = async (keys: string[]) => {
    const deadline = Date.now() + 10 * OBSERVER_WAIT_MS;
    while (Date.now() < deadline && keys.some((key) => !sentAt.has(key))) await new Promise((resolve) => setTimeout(resolve, 50));
  };
  return { sentAt, caughtUp, stop: () => consumer.disconnect() };
}

/** The whole chain: POST /v1/orders at the rate; per order, its commit to fulfillment's effect. */
async function wholeChain(
  kafka: Kafka,
  api: RunningApp,
  ordersPool: Pool,
  fulfillmentPool: Pool,
  options: Options,
  problems: string[],
): Promise<Chain> {
  const orders = new OrdersDb(benchOrdersUrl);
  const client = new KeepAliveClient(api.url, CONNECTIONS);
  const observer = await observeSends(kafka);
  try {
    /** Posts one order; its 201 lands in `replies` (order id -> when it arrived) and its round trip in `roundTrips`. */
    const post =
      (apiKey: string, replies: Map<string, number>, unexpected: string[], roundTrips: number[] = []) =>
      async () => {
        const reply = await client.send({
          method: 'POST',
          path: '/v1/orders',
          headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID() },
          body: JSON.stringify({ sku: 'BENCH-1', quantity: 1 }),
        });
        const at = performance.timeOrigin + performance.now();
        if (reply.status === 201) {
          replies.set(String(JSON.parse(reply.body).id), at);
          roundTrips.push(reply.ms);
        } else unexpected.push(`${reply.status} ${reply.body.slice(0, 160)}`);
      };
    const count = (tenantId: string) => async () =>
      (await fulfillmentPool.query<{ n: number }>('SELECT count(*)::int AS n FROM shipments WHERE tenant_id = $1', [tenantId])).rows[0].n;

    const warmup = await orders.tenant();
    progress(`whole chain: warming up (${WARMUP_SECONDS} s at ${options.rate}/s)`);
    const warmupUnexpected: string[] = [];
    const warmupReplies = new Map<string, number>();
    await atRate(options.rate, WARMUP_SECONDS, post(warmup.apiKey, warmupReplies, warmupUnexpected));
    await until(count(warmup.tenantId), warmupReplies.size, 60_000);

    const { tenantId, apiKey } = await orders.tenant();
    const replies = new Map<string, number>();
    const unexpected: string[] = [];
    const commandMs: number[] = [];
    progress(`whole chain: POST /v1/orders at ${options.rate}/s for ${options.seconds} s`);
    await atRate(options.rate, options.seconds, post(apiKey, replies, unexpected, commandMs));
    const sent = options.rate * options.seconds;
    if (unexpected.length) problems.push(`${unexpected.length} of ${sent} POSTs were not 201, e.g. ${unexpected[0]}`);
    const have = await until(count(tenantId), replies.size, 60_000);
    if (have !== replies.size) problems.push(`${replies.size - have} of ${replies.size} orders have no shipment 60 s after the last`);

    const { rows: committed } = await ordersPool.query<{ id: string; at: number }>(
      /* sql */ `
      SELECT o.id::text, ${epochMs('o.created_at')} AS at
      FROM orders o JOIN outbox_messages m ON m.message_key = o.id::text
      WHERE o.tenant_id = $1`,
      [tenantId],
    );
    await observer.caughtUp(committed.map((order) => order.id));
    const { rows: effects } = await fulfillmentPool.query<{ order_id: string; at: number; n: number }>(
      `SELECT order_id::text, min(${epochMs('created_at')}) AS at, count(*)::int AS n FROM shipments WHERE tenant_id = $1 GROUP BY order_id`,
      [tenantId],
    );
    const effectAt = new Map(effects.map((row) => [row.order_id, row.at]));
    const repeated = effects.filter((row) => row.n > 1).length;
    if (repeated) problems.push(`${repeated} orders have more than one shipment`);
    if (committed.length !== replies.size) problems.push(`${committed.length} orders with an outbox row for ${replies.size} created`);
    const withEffect = committed.filter((order) => effectAt.has(order.id));
    return {
      fromCommit: summarise(
        'whole chain: order commit -> effect',
        "orders.created_at -> shipments.created_at (each its transaction's start, one server clock)",
        replies.size,
        withEffect.map((order) => effectAt.get(order.id)! - order.at),
      ),
      fromReply: summarise(
        'whole chain: HTTP reply -> effect (a lower bound)',
        'the 201 reply reaching the client (after the commit) -> shipments.created_at',
        replies.size,
        withEffect.map((order) => effectAt.get(order.id)! - replies.get(order.id)!),
      ),
      command: summarise(
        '  the command itself: POST sent -> 201 received',
        "the load generator's request to its reply (the commit comes just before the reply)",
        replies.size,
        commandMs,
      ),
      toKafka: summarise(
        '  of which: order commit -> Kafka (the relay)',
        "orders.created_at -> the message's Kafka timestamp (set by the relay's producer as it sends)",
        replies.size,
        committed.filter((order) => observer.sentAt.has(order.id)).map((order) => observer.sentAt.get(order.id)! - order.at),
      ),
      kafkaToEffect: summarise(
        '  of which: Kafka send -> effect (fulfillment)',
        "the message's Kafka timestamp -> shipments.created_at",
        replies.size,
        withEffect
          .filter((order) => observer.sentAt.has(order.id))
          .map((order) => effectAt.get(order.id)! - observer.sentAt.get(order.id)!),
      ),
      unexpectedReplies: unexpected.length,
    };
  } finally {
    client.close();
    await observer.stop();
    await orders.close();
  }
}

export async function run(argv: string[]): Promise<BenchResult> {
  const options = parseOptions(argv);
  const machine = describeMachine();
  progress('recreating the bench databases, building');
  await prepareBenchDatabases([
    [benchOrdersUrl, 'BENCH_ORDERS_DATABASE_URL', 'orders'],
    [benchFulfillmentUrl, 'BENCH_FULFILLMENT_DATABASE_URL', 'fulfillment'],
    ...(options.notifier ? [[benchNotifierUrl, 'BENCH_NOTIFIER_DATABASE_URL', 'notifier'] as [string, string, 'notifier']] : []),
  ]);
  buildForTests();
  const server = await describeServer(benchOrdersUrl);

  const problems: string[] = [];
  const ordersPool = new Pool({ connectionString: benchOrdersUrl, max: 2 });
  const fulfillmentPool = new Pool({ connectionString: benchFulfillmentUrl, max: PARTITIONS_IN_PARALLEL + 2 });
  const kafka = testKafka('bench-latency');
  const receiver = new WebhookReceiver();
  const apps: RunningApp[] = [];
  try {
    await ensureServiceTopics(kafka);
    await createBareTables(fulfillmentPool);
    const bare = await barePath(kafka, fulfillmentPool, options, problems);

    progress(`starting command-api, outbox-relay, fulfillment${options.notifier ? ', notifier' : ''}`);
    await skipConsumerBacklog(kafka, ['fulfillment', 'notifier'], Topics.orderEvents);
    const common = { NODE_ENV: 'production', LOG_LEVEL: 'warn', KAFKA_BROKERS: process.env.KAFKA_BROKERS! };
    const api = await startApp('command-api', { ...common, ORDERS_DATABASE_URL: benchOrdersUrl });
    apps.push(api);
    apps.push(await startApp('outbox-relay', { ...common, ORDERS_DATABASE_URL: benchOrdersUrl }));
    apps.push(await startApp('fulfillment', { ...common, FULFILLMENT_DATABASE_URL: benchFulfillmentUrl }));
    if (options.notifier) {
      await receiver.start();
      // NODE_ENV=test: production refuses a plain-http WEBHOOK_URL and the development secret.
      apps.push(
        await startApp('notifier', { ...common, NODE_ENV: 'test', NOTIFIER_DATABASE_URL: benchNotifierUrl, WEBHOOK_URL: receiver.url }),
      );
    }
    const chain = await wholeChain(kafka, api, ordersPool, fulfillmentPool, options, problems);
    for (const app of apps) {
      if (app.process.exitCode !== null || app.process.signalCode !== null)
        problems.push(`an app exited during the run:\n${app.output().slice(-2000)}`);
    }
    const report: Report = {
      ok: problems.length === 0,
      machine,
      server,
      settings: {
        rate: options.rate,
        seconds: options.seconds,
        warmupSeconds: WARMUP_SECONDS,
        connections: CONNECTIONS,
        notifier: options.notifier ? 'yes' : 'no',
        LOG_LEVEL: 'warn',
      },
      rows: [bare, chain.fromCommit, chain.fromReply, chain.command, chain.toKafka, chain.kafkaToEffect],
      problems,
    };
    return { report, text: print(report), section: section(report) };
  } finally {
    await Promise.all(apps.map((app) => app.stop()));
    if (options.notifier) await receiver.stop(); // a receiver never started would never report its close
    await ordersPool.end();
    await fulfillmentPool.end();
  }
}

interface Report {
  ok: boolean;
  machine: Machine;
  server: string;
  settings: Record<string, string | number>;
  /** Baseline first, then the chain from the commit (the one the target is about), from the reply, and its legs. */
  rows: Latencies[];
  problems: string[];
}

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : '-');

function print(report: Report): string {
  const { machine, settings } = report;
  return [
    `machine: ${machine.cpus} CPUs (${machine.cpuModel}), Node ${machine.node}, load average ${machine.loadAverage1m.toFixed(2)} at start; ${report.server}`,
    `${settings.rate} per second for ${settings.seconds} s (after ${settings.warmupSeconds} s of warm-up), notifier ${settings.notifier}, LOG_LEVEL=${settings.LOG_LEVEL}`,
    '',
    `${'path'.padEnd(52)} ${'sent'.padStart(6)} ${'effects'.padStart(8)} ${'p50 ms'.padStart(8)} ${'p95 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'max ms'.padStart(8)}`,
    ...report.rows.map(
      (r) =>
        `${r.name.padEnd(52)} ${String(r.sent).padStart(6)} ${String(r.withEffect).padStart(8)} ${ms(r.p50Ms).padStart(8)} ${ms(r.p95Ms).padStart(8)} ${ms(r.p99Ms).padStart(8)} ${ms(r.maxMs).padStart(8)}`,
    ),
    '',
    report.ok ? 'OK: every order had exactly one effect' : `FAILED:\n${report.problems.map((p) => `  ${p}`).join('\n')}`,
  ].join('\n');
}

function section(report: Report): BenchSection {
  const [bare, chain] = report.rows;
  return {
    id: 'latency',
    title: 'End to end: order commit to fulfillment effect',
    ok: report.ok,
    method:
      `\`POST /v1/orders\` at ${report.settings.rate}/s for ${report.settings.seconds} s (open loop, after a ${report.settings.warmupSeconds} s warm-up) with ` +
      "command-api, outbox-relay and fulfillment running as `npm start` runs them. Per order: `orders.created_at` to its shipment's " +
      "`created_at`, both on one PostgreSQL server: the order's is the command-api's clock just before its transaction begins (one " +
      "host clock here), the shipment's `now()`, its transaction's start; the schema stores no commit time (the receipt and outbox " +
      "timestamps are `now()` of the order's transaction); both transactions last a few ms. Baseline: a bare " +
      'kafkajs producer sending the same OrderPlaced at the same rate and a bare `eachBatch` consumer applying it (send to effect).',
    settings: report.settings,
    table: {
      columns: ['path', 'orders', 'with effect', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms'],
      rows: report.rows.map((r) => [r.name, r.sent, r.withEffect, ms(r.p50Ms), ms(r.p95Ms), ms(r.p99Ms), ms(r.maxMs)]),
    },
    // 1/latency as a ratio to the baseline: the baseline is drawn at 1.0, a slower path below it.
    bars: [bare, chain].map((r) => ({ label: `${r.name} (p99)`, ratio: bare.p99Ms / r.p99Ms, value: `${ms(r.p99Ms)} ms` })),
    targets: [
      {
        target: `commit -> fulfillment effect p99 < 50 ms at ${report.settings.rate} commands/s`,
        measured: `p50 ${ms(chain.p50Ms)} ms, p95 ${ms(chain.p95Ms)} ms, p99 ${ms(chain.p99Ms)} ms, max ${ms(chain.maxMs)} ms (bare path p99 ${ms(bare.p99Ms)} ms)`,
        met: chain.p99Ms < 50 && chain.withEffect === chain.sent,
      },
    ],
    problems: report.problems,
  };
}

if (require.main === module) runAsMain({ usage, run });
