/**
 * `npm run bench -- relay`: how fast apps/outbox-relay drains committed outbox rows into Kafka, as a
 * ratio to a bare kafkajs producer sending the same messages with the same settings in the same run.
 *
 * Each round (`--rounds`, alternating so the machine's noise cancels):
 * 1. baseline: a bare producer (idempotent, acks -1, one request in flight, batches of RELAY_BATCH_SIZE,
 *    the relay's partitioner) sends the round's N messages (same keys, values and headers as the relay
 *    would send) to a fresh topic.
 * 2. for each instance count (`--instances`): that many real relay processes, idle and owning every
 *    shard between them, then N outbox rows shaped like the command API's (OrderPlaced, a quarter of the
 *    orders with an OrderCancelled some rows later) committed in one statement; timed from that commit
 *    to the moment no row is left unpublished (polled on the database every 10 ms). The topic is then
 *    read back: every message-id arrived, duplicates counted, each key's messages in outbox order.
 * 3. "piled up": one relay drains N rows the same way on a database of its own (`<bench database>_pile`)
 *    holding P rows published the way the relay publishes them (their unpublished-index entries left
 *    dead, no vacuum in between; the claim's plan explained once, before any relay scanned them).
 * The drains run in the opposite order every other round; the piled-up drain's ratio to the empty
 * table's is the mean of the rounds' ratios, each round's two drains minutes apart at most.
 * Then the B5 peer: pg-transactional-outbox 0.5.7 polling its own table (bench/peers/pg-transactional-outbox.ts).
 * Exit 0 when nothing was lost, duplicated or out of order, 1 otherwise, 2 on bad usage.
 */
import { benchOrdersUrl } from './bench-env'; // first: it points test/support at the bench databases
import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, Message } from 'kafkajs';
import { Pool } from 'pg';
import { OrderEventTypes, Topics } from '@app/contracts';
import { CLAIM, keyHash, OutboxRow, toKafkaMessage } from '@app/outbox';
import { orderedProducer } from '@app/platform';
import { RunningApp, startApp } from '../test/support/apps';
import { buildForTests } from '../test/support/build';
import { testKafka } from '../test/support/kafka';
import { benchDatabaseName, describeServer, prepareBenchDatabases } from './bench-database';
import { describeMachine, Machine, runAsMain } from './cli';
import { brokerPid, CpuShare, ownCpuMs, postgresCpuMs, processCpuMs, startCpuShare } from './cpu';
import { flameGraph } from './flame-graph';
import { benchArgs, integer, integerFlag, svgFlag } from './options';
import { PEER_BATCH_SIZE, PEER_LOCK_MS, PEER_POLL_MS, PEER_TABLE, setupPeerOutbox } from './peers/pg-transactional-outbox';
import { BenchResult, BenchSection, UsageError } from './section';

/** The relay's defaults (apps/outbox-relay/src/config.ts), spelt out so the baseline uses the same. */
const BATCH_SIZE = 500;
const SHARDS = 16;
const PARTITIONS = 6;
const progress = (text: string) => process.stderr.write(`bench: ${text}\n`);

interface Options {
  rows: number;
  rounds: number;
  instances: number[];
  pile: number;
  peer: boolean;
  peerMode: 'parallel' | 'sequential';
  json: boolean;
  profile?: string;
}

export const usage =
  'usage: npm run bench -- relay [--rows N (100-1000000, default 20000)] [--rounds N (1-10, default 2)] [--instances 1,2,4] ' +
  '[--pile N (0-2000000, default 100000)] [--no-peer] [--peer-mode parallel|sequential] [--json] [--profile <out.svg> (one relay under --cpu-prof)]';

function parseOptions(argv: string[]): Options {
  const values = benchArgs(argv, {
    rows: { type: 'string' },
    rounds: { type: 'string' },
    instances: { type: 'string' },
    pile: { type: 'string' },
    'no-peer': { type: 'boolean', default: false },
    'peer-mode': { type: 'string' },
    profile: { type: 'string' },
  });
  const instances = (values.instances ?? '1,2,4').split(',').map((text) => integer('--instances', text, 1, 1, SHARDS));
  const bad = instances.find((value) => typeof value === 'string');
  if (bad !== undefined) throw new UsageError(`${bad} (a comma-separated list)`);
  const peerMode = values['peer-mode'] ?? 'parallel';
  if (peerMode !== 'parallel' && peerMode !== 'sequential')
    throw new UsageError(`--peer-mode must be parallel or sequential, got "${peerMode}"`);
  return {
    rows: integerFlag('--rows', values.rows, 20_000, 100, 1_000_000),
    rounds: integerFlag('--rounds', values.rounds, 2, 1, 10),
    instances: [...new Set(instances as number[])],
    pile: integerFlag('--pile', values.pile, 100_000, 0, 2_000_000),
    peer: !values['no-peer'],
    peerMode,
    json: values.json,
    profile: svgFlag('--profile', values.profile),
  };
}

/** One round's messages: the rows a relay finds in the outbox, in sequence order. */
interface Workload {
  topic: string;
  tenantId: string;
  rows: OutboxRow[];
  /** Each key's message-ids in outbox order. */
  byKey: Map<string, string[]>;
}

/**
 * N rows as the command API writes them: OrderPlaced for fresh orders, and for every fourth order an
 * OrderCancelled about 40 rows later (same key, so its order is checked on the topic).
 */
function workload(n: number, topic: string): Workload {
  const tenantId = `bench-${randomUUID().slice(0, 8)}`;
  const rows: OutboxRow[] = [];
  const pending: { at: number; orderId: string }[] = [];
  const now = new Date();
  const row = (orderId: string, type: string, payload: object): OutboxRow => ({
    id: randomUUID(),
    sequence: String(rows.length),
    topic,
    message_key: orderId,
    event_type: type,
    event_version: 1,
    tenant_id: tenantId,
    payload,
    headers: { traceparent: `00-${randomUUID().replace(/-/g, '')}-${randomUUID().replace(/-/g, '').slice(0, 16)}-01` },
    created_at: now,
  });
  while (rows.length < n) {
    if (pending.length && pending[0].at <= rows.length) {
      const { orderId } = pending.shift()!;
      rows.push(row(orderId, OrderEventTypes.cancelled, { orderId, tenantId, reason: 'changed my mind', cancelledAt: now.toISOString() }));
      continue;
    }
    const orderId = randomUUID();
    rows.push(
      row(orderId, OrderEventTypes.placed, {
        orderId,
        tenantId,
        sku: `SKU-${rows.length % 97}`,
        quantity: 1 + (rows.length % 5),
        customerRef: null,
        placedAt: now.toISOString(),
      }),
    );
    if (rows.length % 4 === 0) pending.push({ at: rows.length + 40, orderId });
  }
  const byKey = new Map<string, string[]>();
  for (const r of rows) byKey.set(r.message_key, [...(byKey.get(r.message_key) ?? []), r.id]);
  return { topic, tenantId, rows, byKey };
}

async function createTopic(kafka: Kafka, topic: string): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
}

/** Each payload as PostgreSQL prints it, which is what the relay sends (it reads the jsonb as text). */
async function asPrinted(db: Pool, work: Workload): Promise<Workload> {
  const { rows } = await db.query<{ text: string }>(
    /* sql */ `SELECT p::text AS text FROM unnest($1::jsonb[]) WITH ORDINALITY AS r(p, n) ORDER BY n`,
    [work.rows.map((r) => JSON.stringify(r.payload))],
  );
  rows.forEach((row, i) => (work.rows[i].payload_json = row.text));
  return work;
}

/** The baseline: the same messages through a bare producer with the relay's settings, batch after batch. */
async function bareProducer(kafka: Kafka, work: Workload): Promise<{ seconds: number; cpu: CpuShare }> {
  const producer = orderedProducer(kafka);
  await producer.connect();
  try {
    const cpu = cpuShare(ownCpuMs);
    const started = performance.now();
    for (let i = 0; i < work.rows.length; i += BATCH_SIZE) {
      const messages: Message[] = work.rows.slice(i, i + BATCH_SIZE).map(toKafkaMessage);
      await producer.sendBatch({ acks: -1, topicMessages: [{ topic: work.topic, messages }] });
    }
    return { seconds: (performance.now() - started) / 1000, cpu: cpu(work.rows.length) };
  } finally {
    await producer.disconnect();
  }
}

/**
 * Inserts the rows in sequence order, 50,000 per statement (one commit and one NOTIFY each). Returns
 * when the first statement committed (performance.now()): the relays start on those rows at once.
 */
async function seed(db: Pool, rows: OutboxRow[], published = false, onFirstCommit?: () => void): Promise<number> {
  let firstCommit = NaN;
  for (let i = 0; i < rows.length; i += 50_000) {
    const part = rows.slice(i, i + 50_000);
    await db.query(
      /* sql */ `
      INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, headers, published_at)
      SELECT id, topic, key, hash, type, 1, tenant, payload, headers, CASE WHEN $10 THEN now() END
      FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::jsonb[], $8::jsonb[], $9::int[])
           AS r(id, topic, key, hash, type, tenant, payload, headers, n)
      ORDER BY n`,
      [
        part.map((r) => r.id),
        part.map((r) => r.topic),
        part.map((r) => r.message_key),
        part.map((r) => keyHash(r.message_key)),
        part.map((r) => r.event_type),
        part.map((r) => r.tenant_id),
        part.map((r) => JSON.stringify(r.payload)),
        part.map((r) => JSON.stringify(r.headers)),
        part.map((_, n) => n),
        published,
      ],
    );
    if (i === 0) {
      firstCommit = performance.now();
      onFirstCommit?.();
    }
  }
  return firstCommit;
}

/**
 * Seeds the workload and waits until no row is left unpublished: seconds from the seed's first commit
 * (with more than 50,000 rows the relays publish the first statement's while the next is inserted). Polls
 * the last seeded row by its key first (a count of the unpublished rows every 10 ms would itself scan
 * the whole backlog, competing with the relay for the CPU), then counts the few left. Where the CPU
 * went is counted over the same span (`publisherCpuMs` reads the publishers').
 */
async function drain(db: Pool, work: Workload, publisherCpuMs = () => NaN): Promise<{ seconds: number; cpu: CpuShare }> {
  let share: ((rows: number) => CpuShare) | undefined;
  const committed = await seed(db, work.rows, false, () => (share = cpuShare(publisherCpuMs)));
  const deadline = Date.now() + 600_000;
  const lastId = work.rows[work.rows.length - 1].id;
  let lastPublished = false;
  for (;;) {
    if (!lastPublished) {
      const { rows } = await db.query(/* sql */ `SELECT published_at IS NOT NULL AS done FROM outbox_messages WHERE id = $1`, [lastId]);
      lastPublished = rows[0].done;
    }
    if (lastPublished) {
      const { rows } = await db.query(/* sql */ `SELECT count(*)::int AS n FROM outbox_messages WHERE published_at IS NULL`);
      if (rows[0].n === 0) {
        const seconds = (performance.now() - committed) / 1000;
        return { seconds, cpu: share!(work.rows.length) }; // seed started it at its first commit
      }
    }
    if (Date.now() > deadline) throw new Error('not drained in 10 minutes');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

interface Check {
  missing: number;
  duplicates: number;
  keysOutOfOrder: number;
}

/** Reads the topic from the beginning: every message-id once, each key's messages in outbox order. */
async function readBack(kafka: Kafka, work: Workload, { timeoutMs = 120_000, expected = work.rows.length } = {}): Promise<Check> {
  const consumer = kafka.consumer({ groupId: `bench-relay-check-${randomUUID()}`, allowAutoTopicCreation: false });
  const arrived = new Map<string, string[]>();
  const seen = new Map<string, number>();
  let count = 0;
  await consumer.connect();
  try {
    await consumer.subscribe({ topic: work.topic, fromBeginning: true });
    await consumer.run({
      eachBatch: async ({ batch }) => {
        for (const message of batch.messages) {
          const id = message.headers?.['message-id']?.toString() ?? '';
          const key = message.key?.toString() ?? '';
          seen.set(id, (seen.get(id) ?? 0) + 1);
          arrived.set(key, [...(arrived.get(key) ?? []), id]);
          count++;
        }
      },
    });
    const deadline = Date.now() + timeoutMs;
    let last = -1;
    let quietSince = Date.now();
    // Until every id arrived and nothing more came for a second (duplicates arrive late, if at all).
    while (Date.now() < deadline) {
      if (count !== last) [last, quietSince] = [count, Date.now()];
      if (seen.size >= expected && Date.now() - quietSince > 1_000) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    await consumer.disconnect();
  }
  let missing = 0;
  let duplicates = 0;
  let keysOutOfOrder = 0;
  for (const r of work.rows) {
    const times = seen.get(r.id) ?? 0;
    if (times === 0) missing++;
    if (times > 1) duplicates += times - 1;
  }
  for (const [key, ids] of work.byKey) {
    // Redelivered duplicates may repeat earlier ids; the order is that of each id's first arrival.
    const firsts = [...new Set(arrived.get(key) ?? [])];
    if (firsts.join() !== ids.filter((id) => seen.has(id)).join()) keysOutOfOrder++;
  }
  return { missing, duplicates, keysOutOfOrder };
}

/** CPU the relays used so far, in ms. */
function relaysCpuMs(relays: RunningApp[]): number {
  return relays.reduce((sum, relay) => sum + processCpuMs(relay.process.pid!), 0);
}

/**
 * Starts counting where the CPU goes while rows are published: the publisher (`publisher`: the relays or
 * this process), PostgreSQL, the bench's broker, and the machine as a whole.
 */
function cpuShare(publisher: () => number): (rows: number) => CpuShare {
  const port = Number(process.env.KAFKA_BROKERS?.split(',')[0].split(':').pop());
  const broker = brokerPid(port);
  return startCpuShare({ publisher, postgres: postgresCpuMs, broker: () => (broker === undefined ? NaN : processCpuMs(broker)) });
}

/** Rows each relay process drains before it is measured, and the bare producer's process sends before its rounds. */
const WARMUP_ROWS = 2_000;

/**
 * `count` relays that own every shard between them and have already drained a backlog of WARMUP_ROWS
 * each (to a topic of their own, not measured): a relay in service has been running for a while, and
 * a process just started would run its first batches in V8's interpreter, while the bare producer runs
 * in this process, warmed before its first round. `rows` caps the warm-up at the measured size.
 */
async function startWarmRelays(
  outbox: Outbox,
  kafka: Kafka,
  { count, rows, topic, nodeArgs }: { count: number; rows: number; topic: string; nodeArgs?: string[] },
): Promise<RunningApp[]> {
  const relays = await startRelays(outbox, count, nodeArgs);
  const work = workload(Math.min(WARMUP_ROWS, rows) * count, topic);
  await createTopic(kafka, work.topic);
  await drain(outbox.db, work);
  return relays;
}

/** An orders database the relays drain: its URL for them, a pool for the bench. */
interface Outbox {
  url: string;
  db: Pool;
}

/** Starts `count` relays on `outbox` and waits until they own every shard between them, each its fair share. */
async function startRelays({ url, db }: Outbox, count: number, nodeArgs: string[] = []): Promise<RunningApp[]> {
  const relays: RunningApp[] = [];
  for (let i = 0; i < count; i++) {
    relays.push(
      await startApp(
        'outbox-relay',
        {
          LOG_LEVEL: 'warn',
          ORDERS_DATABASE_URL: url,
          RELAY_BATCH_SIZE: String(BATCH_SIZE),
          RELAY_SHARDS: String(SHARDS),
          RELAY_HEARTBEAT_MS: '500',
          OUTBOX_CLEANUP_INTERVAL_SECONDS: '0',
        },
        { nodeArgs },
      ),
    );
  }
  const fair = Math.ceil(SHARDS / count);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { rows } = await db.query<{ n: number; owned: number; most: number }>(/* sql */ `
      SELECT count(*)::int AS n, coalesce(sum(cardinality(shards)), 0)::int AS owned, coalesce(max(cardinality(shards)), 0)::int AS most
      FROM outbox_relay_instances WHERE heartbeat_at > now() - interval '3 seconds'`);
    if (rows[0].n === count && rows[0].owned === SHARDS && rows[0].most <= fair) return relays;
    if (Date.now() > deadline) throw new Error(`relays did not share the shards within 60 s: ${JSON.stringify(rows[0])}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function stopRelays(relays: RunningApp[], problems: string[]): Promise<void> {
  for (const relay of relays) {
    const exit = await relay.stop();
    if (exit.code !== 0 && exit.signal !== 'SIGTERM')
      problems.push(`a relay exited with ${exit.code ?? exit.signal}:\n${relay.output().slice(-2_000)}`);
  }
}

/** The peer's run: its own table, seeded with the same messages, drained by its polling listener. */
async function peerDrain(
  db: Pool,
  kafka: Kafka,
  work: Workload,
  mode: 'parallel' | 'sequential',
  findings: string[],
): Promise<{ seconds: number; check: Check } | { error: string }> {
  await setupPeerOutbox(benchOrdersUrl);
  let child: ChildProcess | undefined;
  try {
    child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'peers', 'pg-transactional-outbox.ts')], {
      cwd: join(__dirname, '..'),
      env: { ...process.env, PEER_DATABASE_URL: benchOrdersUrl, PEER_KAFKA_BROKERS: process.env.KAFKA_BROKERS!, PEER_TOPIC: work.topic },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stderr!.on('data', (chunk) => (output += chunk));
    await new Promise<void>((resolve, reject) => {
      child!.stdout!.on('data', (chunk) => {
        output += chunk;
        if (String(chunk).includes('ready')) resolve();
      });
      child!.once('exit', (code) => reject(new Error(`the peer exited with ${code} before it was ready:\n${output.slice(-2_000)}`)));
    });
    await db.query(
      /* sql */ `
      INSERT INTO ${PEER_TABLE} (id, aggregate_type, aggregate_id, message_type, segment, concurrency, payload, metadata)
      SELECT id, 'order', key, type, CASE WHEN $7 = 'sequential' THEN key END, $7, payload, headers
      FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::jsonb[], $6::int[]) AS r(id, key, type, payload, headers, n)
      ORDER BY n`,
      [
        work.rows.map((r) => r.id),
        work.rows.map((r) => r.message_key),
        work.rows.map((r) => r.event_type),
        work.rows.map((r) => JSON.stringify(r.payload)),
        work.rows.map((r) => JSON.stringify(toKafkaMessage(r).headers)),
        work.rows.map((_, n) => n),
        mode,
      ],
    );
    const committed = performance.now();
    const deadline = Date.now() + 900_000;
    for (;;) {
      const { rows } = await db.query(
        /* sql */ `SELECT count(*)::int AS n FROM ${PEER_TABLE} WHERE processed_at IS NULL AND abandoned_at IS NULL`,
      );
      if (rows[0].n === 0) break;
      if (child.exitCode !== null) return { error: `the peer exited with ${child.exitCode}: ${output.slice(-1_000)}` };
      if (Date.now() > deadline) return { error: `the peer had not drained ${work.rows.length} rows after 15 minutes (${rows[0].n} left)` };
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const seconds = (performance.now() - committed) / 1000;
    const { rows: abandoned } = await db.query(`SELECT count(*)::int AS n FROM ${PEER_TABLE} WHERE abandoned_at IS NOT NULL`);
    if (abandoned[0].n)
      findings.push(`it gave up (abandoned) ${abandoned[0].n} messages: ${/"message":"([^"]{0,200})/.exec(output)?.[1] ?? 'see its log'}`);
    // What it gave up on never reaches Kafka: wait for the rest only.
    return { seconds, check: await readBack(kafka, work, { expected: work.rows.length - abandoned[0].n }) };
  } catch (error) {
    return { error: (error as Error).message.split('\n')[0] };
  } finally {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child!.once('exit', resolve));
    }
  }
}

/** Deletes every outbox row and vacuums the table (the column statistics stay). */
async function emptyOutbox(db: Pool): Promise<void> {
  await db.query(/* sql */ `DELETE FROM outbox_messages`);
  await db.query(/* sql */ `VACUUM outbox_messages`);
}

/** The claim's plan and time at the current table size, without claiming anything (rolled back). */
async function explainClaim(db: Pool): Promise<{ plan: string; ms: number }> {
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query(
      /* sql */ `
      EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) ${CLAIM}`,
      [SHARDS, Array.from({ length: SHARDS }, (_, i) => i), BATCH_SIZE, [], 0], // from the bottom, as after each heartbeat
    );
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    return { plan, ms: Number(/Execution Time: ([\d.]+)/.exec(plan)?.[1] ?? NaN) };
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release();
  }
}

interface Measurement {
  name: string;
  round: number;
  rows: number;
  seconds: number;
  perSecond: number;
  /** To the baseline of the same round. */
  vsBaseline: number;
  /**
   * Where the CPU went while the rows were published, per 1,000 rows: `publisher` (the relays, or this
   * process for the bare producer), `postgres` (every PostgreSQL process) and `broker`; and how busy the
   * machine's CPUs were.
   */
  cpu?: CpuShare;
  check?: Check;
}

/** The scenario one relay drains on top of `pile` published rows. */
const pileName = (pile: number) => `outbox-relay x1 on ${pile} published rows`;

/** The piled-up table's database: the bench database's name with `_pile`, on the same server. */
function pileDatabaseUrl(): string {
  const url = new URL(benchOrdersUrl);
  url.pathname = `/${benchDatabaseName(benchOrdersUrl) ?? 'bench_orders'}_pile`;
  return url.toString();
}

/** One drain of `rows` in `seconds`, against the baseline's rate `base` (rows/s). */
function measured(
  name: string,
  round: number,
  rows: number,
  seconds: number,
  base: number,
  extra: Pick<Measurement, 'cpu' | 'check'> = {},
): Measurement {
  return { name, round, rows, seconds, perSecond: rows / seconds, vsBaseline: rows / seconds / base, ...extra };
}

export async function run(argv: string[]): Promise<BenchResult> {
  const options = parseOptions(argv);
  if (!process.env.KAFKA_BROKERS)
    throw new UsageError('KAFKA_BROKERS is not set: run it through `npm run bench -- relay` (scripts/bench.sh starts the broker)');
  const machine = describeMachine();
  progress('recreating the bench databases, building');
  const pileUrl = pileDatabaseUrl();
  await prepareBenchDatabases(
    [benchOrdersUrl, ...(options.pile > 0 ? [pileUrl] : [])].map((url) => [url, 'BENCH_ORDERS_DATABASE_URL', 'orders']),
  );
  const server = await describeServer(benchOrdersUrl);
  buildForTests();

  const db = new Pool({ connectionString: benchOrdersUrl, max: 3 });
  const empty: Outbox = { url: benchOrdersUrl, db };
  const piled: Outbox | undefined = options.pile > 0 ? { url: pileUrl, db: new Pool({ connectionString: pileUrl, max: 3 }) } : undefined;
  const kafka = testKafka('bench-relay');
  const problems: string[] = [];
  const measurements: Measurement[] = [];
  const topic = (what: string) => `bench.relay.${what}.${randomUUID().slice(0, 8)}`;
  const checked = (name: string, check: Check) => {
    if (check.missing || check.keysOutOfOrder)
      problems.push(`${name}: ${check.missing} messages lost, ${check.keysOutOfOrder} keys out of order`);
    if (check.duplicates) problems.push(`${name}: ${check.duplicates} duplicates (at least once allows them, but no fault was injected)`);
  };
  let pile: { rows: number; claimPlan: string; claimMs: number } | undefined;
  let peer: Report['peer'];
  let profileNote: string | undefined;
  try {
    progress('warming up: broker, relay build, producer');
    const warm = await asPrinted(db, workload(Math.min(WARMUP_ROWS, options.rows), topic('warmup')));
    await createTopic(kafka, warm.topic);
    await bareProducer(kafka, warm);
    // A table in service has rows and statistics (autovacuum analyzes it); the freshly created one has
    // none, and without them the planner takes the parked-key lookup for a sequential scan per claim.
    await stopRelays(await startWarmRelays(empty, kafka, { count: 1, rows: options.rows, topic: topic('warmup') }), problems);
    await db.query(/* sql */ `ANALYZE outbox_messages`);

    if (piled) {
      progress(`piling up: ${options.pile} rows published the way the relay marks them, in a database of their own`);
      await seed(piled.db, workload(options.pile, Topics.orderEvents).rows);
      await piled.db.query(/* sql */ `UPDATE outbox_messages SET published_at = now(), attempts = attempts + 1 WHERE published_at IS NULL`);
      // Statistics as autovacuum leaves them within a minute of that many changes; no VACUUM, so the
      // unpublished index keeps an entry for every one of those rows (dead, not yet removed).
      await piled.db.query(/* sql */ `ANALYZE outbox_messages`);
      // The claim's first look at the dead entries, before any relay has scanned (and hinted) them.
      const explained = await explainClaim(piled.db);
      pile = { rows: options.pile, claimPlan: explained.plan, claimMs: explained.ms };
    }

    const drains = [
      ...options.instances.map((count) => ({ name: `outbox-relay x${count}`, what: `relay${count}`, count, outbox: empty })),
      ...(piled ? [{ name: pileName(options.pile), what: 'pile', count: 1, outbox: piled }] : []),
    ];
    // The piled-up drain right after the empty table's one relay, so that the two are close in time.
    const one = drains.findIndex((d) => d.name === 'outbox-relay x1');
    if (piled && one >= 0) drains.splice(one + 1, 0, drains.pop()!);

    for (let round = 1; round <= options.rounds; round++) {
      const work = await asPrinted(db, workload(options.rows, topic(`baseline-r${round}`)));
      await createTopic(kafka, work.topic);
      progress(`round ${round}: baseline, ${options.rows} messages through a bare producer`);
      const baseline = await bareProducer(kafka, work);
      const base = options.rows / baseline.seconds;
      measurements.push({
        name: 'bare kafkajs producer (baseline)',
        round,
        rows: options.rows,
        seconds: baseline.seconds,
        perSecond: base,
        vsBaseline: 1,
        cpu: baseline.cpu,
      });
      for (const { name, what, count, outbox } of round % 2 ? drains : [...drains].reverse()) {
        const relayWork = { ...workload(options.rows, ''), topic: topic(`${what}-r${round}`) };
        for (const r of relayWork.rows) r.topic = relayWork.topic;
        await createTopic(kafka, relayWork.topic);
        // The empty table's drains start from an empty, vacuumed table (its statistics kept): otherwise each
        // would run on the rows every drain before it published, a pile of its own by the second round.
        if (outbox === empty) await emptyOutbox(db);
        const relays = await startWarmRelays(outbox, kafka, { count, rows: options.rows, topic: topic(`warmup-${what}-r${round}`) });
        progress(`round ${round}: ${name} draining ${options.rows} rows`);
        const { seconds, cpu } = await drain(outbox.db, relayWork, () => relaysCpuMs(relays));
        await stopRelays(relays, problems);
        const check = await readBack(kafka, relayWork);
        checked(`${name} round ${round}`, check);
        measurements.push(measured(name, round, options.rows, seconds, base, { cpu, check }));
      }
    }

    if (options.peer) {
      progress(`peer: pg-transactional-outbox 0.5.7 (polling) draining ${options.rows} rows`);
      const work = workload(options.rows, topic('peer'));
      await createTopic(kafka, work.topic);
      const findings: string[] = [];
      const result = await peerDrain(db, kafka, work, options.peerMode, findings);
      peer = {
        settings: {
          batch: PEER_BATCH_SIZE,
          pollMs: PEER_POLL_MS,
          lockMs: PEER_LOCK_MS,
          concurrency: options.peerMode,
          segment: options.peerMode === 'sequential' ? 'order id' : 'none',
        },
        findings,
      };
      if ('error' in result) {
        peer.error = result.error;
        findings.push(`could not be measured: ${result.error}`);
      } else {
        // The peer's losses, duplicates and disorder are findings about it, not failures of this benchmark.
        const { missing, duplicates, keysOutOfOrder } = result.check;
        if (missing || duplicates || keysOutOfOrder)
          findings.push(`${missing} messages never reached Kafka, ${duplicates} duplicates, ${keysOutOfOrder} keys out of order`);
        const base = mean(measurements.filter((m) => m.name.includes('baseline')).map((m) => m.perSecond));
        measurements.push(
          measured(`pg-transactional-outbox 0.5.7 (polling, ${options.peerMode})`, 0, options.rows, result.seconds, base, {
            check: result.check,
          }),
        );
      }
    }

    if (options.profile) {
      progress(`profile: one relay under --cpu-prof draining ${options.rows} rows`);
      const dir = mkdtempSync(join(tmpdir(), 'relay-profile-'));
      const work = workload(options.rows, topic('profile'));
      await createTopic(kafka, work.topic);
      const relays = await startWarmRelays(empty, kafka, {
        count: 1,
        rows: options.rows,
        topic: topic('profile-warmup'),
        nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`],
      });
      await drain(db, work);
      await stopRelays(relays, problems);
      const [file] = readdirSync(dir).filter((name) => name.endsWith('.cpuprofile'));
      if (file) {
        writeFileSync(
          options.profile,
          flameGraph(JSON.parse(readFileSync(join(dir, file), 'utf8')), `outbox-relay draining ${options.rows} rows`),
        );
        profileNote = `flame graph written to ${options.profile}`;
      } else problems.push('profile: the relay wrote no .cpuprofile');
      if (process.env.BENCH_KEEP_PROFILE) progress(`profile kept in ${dir}`);
      else rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    await db.end();
    await piled?.db.end();
  }

  const report: Report = {
    ok: problems.length === 0,
    machine,
    server,
    settings: {
      rows: options.rows,
      rounds: options.rounds,
      RELAY_BATCH_SIZE: BATCH_SIZE,
      RELAY_SHARDS: SHARDS,
      partitions: PARTITIONS,
      pile: options.pile,
    },
    measurements,
    summary: summarise(measurements),
    pile,
    peer,
    profile: profileNote,
    problems,
  };
  return { report, text: print(report), section: section(report) };
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

interface Summary {
  name: string;
  rounds: number;
  perSecond: number;
  vsBaseline: number;
  /** Means over the rounds: ms of CPU per 1,000 rows by part, and the machine's busy fraction. */
  cpu?: CpuShare;
  lost: number;
  duplicates: number;
  keysOutOfOrder: number;
}

/** Per scenario: the mean rate over its rounds and the mean of its per-round ratios. */
function summarise(measurements: Measurement[]): Summary[] {
  const names = [...new Set(measurements.map((m) => m.name))];
  return names.map((name) => {
    const of = measurements.filter((m) => m.name === name);
    return {
      name,
      rounds: of.length,
      perSecond: mean(of.map((m) => m.perSecond)),
      vsBaseline: mean(of.map((m) => m.vsBaseline)),
      cpu: meanCpu(of.map((m) => m.cpu)),
      lost: of.reduce((n, m) => n + (m.check?.missing ?? 0), 0),
      duplicates: of.reduce((n, m) => n + (m.check?.duplicates ?? 0), 0),
      keysOutOfOrder: of.reduce((n, m) => n + (m.check?.keysOutOfOrder ?? 0), 0),
    };
  });
}

function meanCpu(shares: (CpuShare | undefined)[]): CpuShare | undefined {
  if (!shares.length || shares.some((share) => share === undefined)) return undefined;
  const all = shares as CpuShare[];
  const parts = Object.keys(all[0].msPer1000);
  return {
    msPer1000: Object.fromEntries(parts.map((part) => [part, mean(all.map((share) => share.msPer1000[part]))])),
    machineBusy: mean(all.map((share) => share.machineBusy)),
  };
}

/** "46 ms", or "n/a" where /proc could not be read. */
const ms = (value: number | undefined) => (value === undefined || Number.isNaN(value) ? 'n/a' : `${value.toFixed(0)} ms`);
const percent = (value: number | undefined) => (value === undefined || Number.isNaN(value) ? 'n/a' : `${(value * 100).toFixed(0)} %`);
/** All three parts' CPU per 1,000 rows. */
const totalMs = (cpu: CpuShare) => cpu.msPer1000.publisher + cpu.msPer1000.postgres + cpu.msPer1000.broker;

interface Report {
  ok: boolean;
  machine: Machine;
  server: string;
  settings: Record<string, number>;
  measurements: Measurement[];
  summary: Summary[];
  pile?: { rows: number; claimPlan: string; claimMs: number };
  peer?: { settings: Record<string, string | number>; error?: string; findings: string[] };
  profile?: string;
  problems: string[];
}

function print(report: Report): string {
  const { machine } = report;
  const row = (cells: (string | number)[]) =>
    `${String(cells[0]).padEnd(48)} ${cells
      .slice(1)
      .map((c) => String(c).padStart(9))
      .join(' ')}`;
  const lines = [
    `machine: ${machine.cpus} CPUs (${machine.cpuModel}), Node ${machine.node}, load average ${machine.loadAverage1m.toFixed(2)} at start; ${report.server}; ` +
      'relays, PostgreSQL, Kafka and this bench share it',
    `rows ${report.settings.rows} per drain, RELAY_BATCH_SIZE=${BATCH_SIZE}, RELAY_SHARDS=${SHARDS}, ${PARTITIONS} partitions, ${report.settings.rounds} alternating rounds`,
    '',
    row(['each round', 'round', 'seconds', 'rows/s', 'vs base', 'CPU/1000', 'lost', 'dup', 'disorder']),
    ...report.measurements.map((m) =>
      row([
        m.name,
        m.round || '-',
        m.seconds.toFixed(2),
        m.perSecond.toFixed(0),
        `${m.vsBaseline.toFixed(2)}x`,
        ms(m.cpu?.msPer1000.publisher),
        m.check?.missing ?? '-',
        m.check?.duplicates ?? '-',
        m.check?.keysOutOfOrder ?? '-',
      ]),
    ),
    '',
    row(['mean over rounds', 'rounds', 'rows/s', 'vs base', 'CPU/1000', 'PG/1000', 'Kafka/1000', 'CPUs busy']),
    ...report.summary.map((s) =>
      row([
        s.name,
        s.rounds,
        s.perSecond.toFixed(0),
        `${s.vsBaseline.toFixed(2)}x`,
        ms(s.cpu?.msPer1000.publisher),
        ms(s.cpu?.msPer1000.postgres),
        ms(s.cpu?.msPer1000.broker),
        percent(s.cpu?.machineBusy),
      ]),
    ),
    '',
    'CPU/1000: the publisher (the relays, or the bench process for the bare producer); PG: every PostgreSQL process; ' +
      `Kafka: the broker; per 1,000 rows. CPUs busy: the machine's ${machine.cpus} CPUs, any process, during the drain.`,
  ];
  if (report.pile)
    lines.push(
      '',
      `claim on ${report.pile.rows} published rows: ${report.pile.claimMs.toFixed(2)} ms (EXPLAIN ANALYZE before any relay scanned them, nothing unpublished)`,
    );
  if (report.peer?.findings.length) lines.push('', `peer pg-transactional-outbox: ${report.peer.findings.join('; ')}`);
  if (report.profile) lines.push('', report.profile);
  lines.push(
    '',
    report.ok
      ? 'OK: every message arrived, none twice, each key in outbox order'
      : `FAILED:\n${report.problems.map((p) => `  ${p}`).join('\n')}`,
  );
  return lines.join('\n');
}

/**
 * What 25,000 rows/s would take of the machine at the CPU per row this drain used: the relay, PostgreSQL
 * and the broker all run on it (CPU the bench's own polling and the rest of the machine used is left out).
 */
function cpuBudget(cpu: CpuShare, cpus: number): string {
  const total = totalMs(cpu);
  if (Number.isNaN(total)) return `CPU per 1,000 rows not readable here`;
  const { publisher, postgres, broker } = cpu.msPer1000;
  return (
    `per 1,000 rows the relay used ${ms(publisher)} of CPU, PostgreSQL ${ms(postgres)}, the broker ${ms(broker)}: ` +
    `25,000 rows/s would take ${((total * 25) / 1000).toFixed(2)} of the ${cpus} CPUs (the drain kept them ${percent(cpu.machineBusy)} busy)`
  );
}

function section(report: Report): BenchSection {
  const one = report.summary.find((s) => s.name === 'outbox-relay x1');
  const base = report.summary.find((s) => s.name.includes('baseline'));
  const piled = report.summary.find((s) => s.name === pileName(report.settings.pile));
  const targets: BenchSection['targets'] = [];
  if (one) {
    targets.push({
      target: '>= 0.7x the bare kafkajs producer with one relay',
      measured: `${one.vsBaseline.toFixed(2)}x`,
      met: one.vsBaseline >= 0.7,
    });
    targets.push({
      target: '>= 25,000 rows/s with one relay',
      measured: `${Math.round(one.perSecond)} rows/s${one.cpu ? `; ${cpuBudget(one.cpu, report.machine.cpus)}` : ''}`,
      met: one.perSecond >= 25_000,
    });
  }
  if (one && piled) {
    // Each round's piled-up drain against the same round's empty-table drain, run next to it.
    const ratios = report.measurements
      .filter((m) => m.name === piled.name)
      .map((m) => m.perSecond / report.measurements.find((o) => o.name === one.name && o.round === m.round)!.perSecond);
    const ratio = mean(ratios);
    targets.push({
      target: `the claim stays fast on ${report.settings.pile} published rows (>= 0.9x of the empty table's rate)`,
      measured:
        `${Math.round(piled.perSecond)} rows/s, ${ratio.toFixed(2)}x of the empty table's in the same rounds ` +
        `(${ratios.map((r) => `${r.toFixed(2)}x`).join(', ')}); the claim's first scan of the dead entries ${report.pile?.claimMs.toFixed(2)} ms`,
      met: ratio >= 0.9,
    });
  }
  const peerRow = report.summary.find((s) => s.name.startsWith('pg-transactional-outbox'));
  if (one && peerRow) {
    const found = report.peer?.findings.length ? `; the peer: ${report.peer.findings.join('; ')}` : '';
    targets.push({
      target: 'ahead of pg-transactional-outbox 0.5.7 (polling)',
      measured: `${(one.perSecond / peerRow.perSecond).toFixed(1)}x its rate${found}`,
      met: one.perSecond > peerRow.perSecond,
    });
  } else if (report.peer?.error) {
    targets.push({
      target: 'ahead of pg-transactional-outbox 0.5.7 (polling)',
      measured: `not measured: ${report.peer.error}`,
      met: false,
    });
  }
  return {
    id: 'relay',
    title: 'Outbox relay (committed rows to Kafka)',
    ok: report.ok,
    method:
      `Consumers idle. ${report.settings.rows} outbox rows shaped like the command API's (OrderPlaced, a quarter of the orders with an ` +
      'OrderCancelled about 40 rows later) are committed in one statement (50,000 per statement beyond that) while the real ' +
      '`apps/outbox-relay` processes are idle and own every shard, each having drained a warm-up backlog of ' +
      `${WARMUP_ROWS.toLocaleString('en-US')} rows first, as the baseline's process sent as many before its rounds (the table analyzed ` +
      'once after a warm-up, as a table in service is, and emptied and vacuumed before each drain, its statistics kept); ' +
      'timed from the first commit until no row is left ' +
      'unpublished (read on the database every 10 ms). Baseline: a bare kafkajs ' +
      `producer with the relay's settings (idempotent, acks -1, one request in flight, batches of ${BATCH_SIZE}) sending the same messages ` +
      `(keys, values, headers) to a fresh topic of ${PARTITIONS} partitions; baseline and relay rounds alternate (${report.settings.rounds} rounds), ` +
      "each ratio is to its own round's baseline. After each drain the topic is read back: every message-id, duplicates, each key in outbox order. " +
      'During each drain /proc tells where the CPU went, per 1,000 rows: the publisher (the relays; the bench process for the bare ' +
      "producer), every PostgreSQL process and the broker, and how busy the machine's CPUs were (any process). " +
      `"Piled up": one relay drains as many rows in every round on a database of its own holding ${report.settings.pile} rows already published ` +
      '(their unpublished-index entries dead, not vacuumed; the table analyzed, as autovacuum does within a minute of that many changes), ' +
      "right after or before the empty table's one relay: the drains run in the opposite order every other round, and the piled-up " +
      "drain's ratio to the empty table's is the mean of the rounds' ratios. " +
      (report.peer
        ? `Peer: pg-transactional-outbox 0.5.7 polling its own table (batch ${PEER_BATCH_SIZE}, poll ${PEER_POLL_MS} ms, lock ${PEER_LOCK_MS} ms, ` +
          `full batches from the start, messages \`${report.peer.settings.concurrency}\`` +
          (report.peer.settings.concurrency === 'sequential'
            ? ' with the order id as segment, its way to keep per-key order'
            : ' without segment: no per-key order') +
          '), publishing each message with the same producer settings; its losses and disorder are reported, not counted as failures here.'
        : ''),
    settings: { ...report.settings, server: report.server },
    table: {
      columns: [
        'scenario',
        'rounds',
        'rows/s',
        'vs baseline',
        'publisher CPU per 1,000 rows',
        'PostgreSQL CPU per 1,000 rows',
        'broker CPU per 1,000 rows',
        'CPUs busy',
        'lost',
        'duplicates',
        'keys out of order',
      ],
      rows: report.summary.map((s) => [
        s.name,
        s.rounds,
        Math.round(s.perSecond),
        `${s.vsBaseline.toFixed(2)}x`,
        ms(s.cpu?.msPer1000.publisher),
        ms(s.cpu?.msPer1000.postgres),
        ms(s.cpu?.msPer1000.broker),
        percent(s.cpu?.machineBusy),
        s.lost,
        s.duplicates,
        s.keysOutOfOrder,
      ]),
    },
    bars: report.summary.map((s) => ({ label: s.name, ratio: s.vsBaseline, value: `${Math.round(s.perSecond)}/s` })),
    targets: base ? targets : [],
    problems: report.problems,
  };
}

if (require.main === module) runAsMain({ usage, run });
