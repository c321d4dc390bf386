/**
 * `npm run bench -- consumers`: how fast the real consumers catch up with a backlog, as a ratio to a bare
 * kafkajs loop doing the same dedupe-and-effect work on the same backlog in the same run.
 *
 * Each round produces N OrderPlaced v1 events to the order topic as the relay does (murmur2 partitioner,
 * key = order id, the relay's headers, a fresh tenant), points every consumer group at the start of that
 * backlog, then lets each consumer drain it in turn (the order alternates between rounds):
 * - bare loop (baseline): kafkajs eachBatch in this process, no Nest; per batch ONE transaction that
 *   inserts the inbox rows ON CONFLICT DO NOTHING and the shipments of the new ones (set-based, two
 *   statements), then commits the offsets after the database commit; one partition's batch at a time,
 *   as the inbox consumer (bench/bare-consumer.ts). Tables shaped like fulfillment's.
 * - fulfillment: the real app (apps/fulfillment, from the tests' build), started fresh.
 * - notifier: the real app recording one webhook delivery per event (its dispatcher delivers them to a
 *   bare receiver meanwhile: that is how it runs).
 * - the B5 peer: pg-transactional-outbox 0.5.7's inbox in polling mode doing fulfillment's effect
 *   (bench/peers/pg-transactional-outbox-inbox.ts); what it loses or duplicates is reported as a finding
 *   about it, not as a failure of this benchmark.
 * Throughput runs from the consumer's start (the app answering /health/live; the bare loop's connect)
 * to the last effect's transaction timestamp, both on the database clock; the group's lag is read
 * before the start and after the last effect. Every event must have exactly one effect and one inbox row.
 * Exit 0 when nothing was lost or duplicated, 1 otherwise, 2 on bad usage.
 */
import { benchFulfillmentUrl, benchNotifierUrl } from './bench-env'; // first: it points test/support at the bench databases
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Admin, Kafka, Message } from 'kafkajs';
import { Pool } from 'pg';
import { Headers, OrderEventTypes, OrderPlacedV1, Topics } from '@app/contracts';
import { orderedProducer } from '@app/platform';
import { RunningApp, startApp } from '../test/support/apps';
import { buildForTests } from '../test/support/build';
import { ensureServiceTopics, testKafka } from '../test/support/kafka';
import { WebhookReceiver } from '../test/support/webhook-receiver';
import { BARE_GROUP, BareConsumer, createBareTables, PARTITIONS_IN_PARALLEL } from './bare-consumer';
import { describeServer, prepareBenchDatabases } from './bench-database';
import { describeMachine, Machine, runAsMain } from './cli';
import { flameGraph } from './flame-graph';
import { benchArgs, integerFlag, svgFlag } from './options';
import { PEER_INBOX_EFFECTS, PEER_INBOX_GROUP, PEER_INBOX_TABLE, setupPeerInbox } from './peers/pg-transactional-outbox-inbox';
import { PEER_BATCH_SIZE, PEER_LOCK_MS, PEER_POLL_MS } from './peers/pg-transactional-outbox';
import { BenchResult, BenchSection } from './section';

const progress = (text: string) => process.stderr.write(`bench: ${text}\n`);
const PEER_NAME = 'pg-transactional-outbox 0.5.7 inbox (polling)';
const SEND_BATCH = 500;

interface Options {
  events: number;
  rounds: number;
  notifier: boolean;
  peer: boolean;
  json: boolean;
  /** Run fulfillment under `node --cpu-prof` (every round) and write a flame graph of its last round here. */
  profile?: string;
}

export const usage =
  'usage: npm run bench -- consumers [--events N (100-1000000, default 20000)] [--rounds N (1-20, default 2)] [--no-notifier] [--no-peer] [--json] [--profile <fulfillment.svg>]';

function parseOptions(argv: string[]): Options {
  const values = benchArgs(argv, {
    events: { type: 'string' },
    rounds: { type: 'string' },
    'no-notifier': { type: 'boolean', default: false },
    'no-peer': { type: 'boolean', default: false },
    profile: { type: 'string' },
  });
  return {
    events: integerFlag('--events', values.events, 20_000, 100, 1_000_000),
    rounds: integerFlag('--rounds', values.rounds, 2, 1, 20),
    notifier: !values['no-notifier'],
    peer: !values['no-peer'],
    json: values.json,
    profile: svgFlag('--profile', values.profile),
  };
}

interface Backlog {
  tenantId: string;
  messageIds: string[];
  /** Where the backlog starts on each partition: every group is pointed here before it drains. */
  start: { partition: number; offset: string }[];
}

/** N OrderPlaced v1 events, as the relay publishes them (libs/outbox kafka-message.ts), in sends of SEND_BATCH. */
async function produceBacklog(kafka: Kafka, admin: Admin, n: number): Promise<Backlog> {
  const tenantId = `bench-${randomUUID().slice(0, 8)}`;
  const start = (await admin.fetchTopicOffsets(Topics.orderEvents)).map(({ partition, high }) => ({ partition, offset: high }));
  const producer = orderedProducer(kafka);
  await producer.connect();
  const messageIds: string[] = [];
  try {
    for (let sent = 0; sent < n;) {
      const messages: Message[] = [];
      for (; messages.length < SEND_BATCH && sent < n; sent++) {
        const orderId = randomUUID();
        const messageId = randomUUID();
        const placedAt = new Date().toISOString();
        const payload: OrderPlacedV1 = {
          orderId,
          tenantId,
          sku: `SKU-${sent % 100}`,
          quantity: 1 + (sent % 5),
          customerRef: null,
          placedAt,
        };
        messages.push({
          key: orderId,
          value: JSON.stringify(payload),
          headers: {
            [Headers.messageId]: messageId,
            [Headers.eventType]: OrderEventTypes.placed,
            [Headers.eventVersion]: '1',
            [Headers.tenantId]: tenantId,
            [Headers.aggregateId]: orderId,
            [Headers.occurredAt]: placedAt,
          },
        });
        messageIds.push(messageId);
      }
      await producer.send({ topic: Topics.orderEvents, acks: -1, messages });
    }
  } finally {
    await producer.disconnect();
  }
  return { tenantId, messageIds, start };
}

/** A topic created a moment ago may not have its leaders known to this client yet. */
async function untilLeadersAnswer(admin: Admin): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await admin.fetchTopicOffsets(Topics.orderEvents);
      return;
    } catch (error) {
      if (attempt >= 60) throw error;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/** Messages between the group's committed offsets and the partitions' ends. */
async function groupLag(admin: Admin, groupId: string): Promise<number> {
  const [ends, [committed]] = await Promise.all([
    admin.fetchTopicOffsets(Topics.orderEvents),
    admin.fetchOffsets({ groupId, topics: [Topics.orderEvents] }),
  ]);
  const at = new Map(committed.partitions.map(({ partition, offset }) => [partition, BigInt(offset)]));
  let lag = 0n;
  for (const { partition, high, low } of ends) {
    const offset = at.get(partition) ?? -1n;
    lag += BigInt(high) - (offset < 0n ? BigInt(low) : offset);
  }
  return Number(lag);
}

/** Points a group (no member running) at the start of the backlog; retries while a stopped member is still counted. */
async function pointGroupAt(admin: Admin, groupId: string, backlog: Backlog): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await admin.setOffsets({ groupId, topic: Topics.orderEvents, partitions: backlog.start });
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/** Our inbox rows (libs/inbox) recording that `consumer` applied an event of the backlog. */
const appliedBy = (consumer: string, table = 'inbox_messages') =>
  `${table} i ON i.consumer = '${consumer}' AND i.message_id = p.id AND i.outcome = 'applied'`;

/** Where a consumer's effects and inbox rows are, to count and time them. */
interface Effects {
  pool: Pool;
  /** The effect table and its timestamp: one row per event. */
  table: string;
  /** Joined to `produced p` (the backlog's message ids): the consumer's inbox rows recording an applied event. */
  appliedInbox: string;
  /** The peer's: its inbox rows it gave up on (abandoned), counted rather than waited for. */
  abandoned?: string;
}

interface Drained {
  name: string;
  round: number;
  events: number;
  /** From the consumer's start to the last effect's transaction timestamp. */
  seconds: number;
  perSecond: number;
  /** From the first effect's transaction timestamp to the last one's: the steady rate. */
  firstToLastSeconds: number;
  lagAtStart: number;
  lagAfter: number;
  /** From the last effect until the group's committed offsets reached the end. */
  lagZeroAfterMs: number | null;
  vsBaseline: number;
}

async function dbNow(pool: Pool): Promise<Date> {
  const { rows } = await pool.query<{ now: Date }>('SELECT clock_timestamp() AS now');
  return rows[0].now;
}

/** Waits for an effect of every event of the backlog, then checks each has exactly one, and times it. */
async function awaitEffects(
  effects: Effects,
  backlog: Backlog,
  admin: Admin,
  group: string,
  started: Date,
  problems: string[],
  name: string,
) {
  const n = backlog.messageIds.length;
  const deadline = Date.now() + 600_000;
  let abandoned = 0;
  for (;;) {
    const { rows } = await effects.pool.query<{ n: number; abandoned: number }>(
      /* sql */ `
      SELECT (SELECT count(*) FROM ${effects.table} WHERE tenant_id = $1)::int AS n,
             ${effects.abandoned ? `(SELECT count(*) FROM ${effects.abandoned} AND id = ANY($2::uuid[]))::int` : '0'} AS abandoned`,
      effects.abandoned ? [backlog.tenantId, backlog.messageIds] : [backlog.tenantId],
    );
    abandoned = rows[0].abandoned;
    if (rows[0].n + abandoned >= n) break;
    if (Date.now() > deadline) throw new Error(`${name}: ${rows[0].n} of ${n} effects after 10 minutes`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (abandoned) problems.push(`${name}: gave up on (abandoned) ${abandoned} of ${n} events: they have no effect`);
  const seenAt = Date.now();
  const {
    rows: [timing],
  } = await effects.pool.query<{ first: Date; last: Date }>(
    `SELECT min(created_at) AS first, max(created_at) AS last FROM ${effects.table} WHERE tenant_id = $1`,
    [backlog.tenantId],
  );
  const {
    rows: [check],
  } = await effects.pool.query<{ missing: number; repeated: number; inbox: number; extra: number }>(
    /* sql */ `
    WITH effects AS (SELECT message_id, count(*) AS n FROM ${effects.table} WHERE tenant_id = $1 GROUP BY message_id),
         produced AS (SELECT unnest($2::uuid[]) AS id)
    SELECT (SELECT count(*) FROM produced p LEFT JOIN effects e ON e.message_id = p.id WHERE e.message_id IS NULL)::int AS missing,
           (SELECT count(*) FROM effects WHERE n > 1)::int AS repeated,
           (SELECT count(*) FROM produced p JOIN ${effects.appliedInbox})::int AS inbox,
           (SELECT count(*) FROM effects e LEFT JOIN produced p ON p.id = e.message_id WHERE p.id IS NULL)::int AS extra`,
    [backlog.tenantId, backlog.messageIds],
  );
  if (check.missing - abandoned || check.repeated || check.extra) {
    problems.push(
      `${name}: ${check.missing - abandoned} events lost (no effect, not abandoned), ${check.repeated} with more than one, ${check.extra} effects of no event`,
    );
  }
  if (check.inbox !== n - abandoned) problems.push(`${name}: ${check.inbox} of ${n} events have an 'applied' inbox row`);
  let lagAfter = await groupLag(admin, group);
  let lagZeroAfterMs: number | null = null;
  while (lagAfter > 0 && Date.now() - seenAt < 10_000) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    lagAfter = await groupLag(admin, group);
  }
  if (lagAfter === 0) lagZeroAfterMs = Math.max(0, Date.now() - timing.last.getTime());
  else problems.push(`${name}: the group still lags ${lagAfter} messages 10 s after the last effect`);
  const seconds = (timing.last.getTime() - started.getTime()) / 1000;
  return { seconds, firstToLastSeconds: (timing.last.getTime() - timing.first.getTime()) / 1000, lagAfter, lagZeroAfterMs };
}

export async function run(argv: string[]): Promise<BenchResult> {
  const options = parseOptions(argv);
  const machine = describeMachine();
  progress('recreating the bench databases, building');
  await prepareBenchDatabases([
    [benchFulfillmentUrl, 'BENCH_FULFILLMENT_DATABASE_URL', 'fulfillment'],
    [benchNotifierUrl, 'BENCH_NOTIFIER_DATABASE_URL', 'notifier'],
  ]);
  buildForTests();
  const server = await describeServer(benchFulfillmentUrl);

  const problems: string[] = [];
  /** What the peer lost, duplicated or gave up on: findings about it, not failures of this benchmark. */
  const peerFindings: string[] = [];
  const fulfillmentPool = new Pool({ connectionString: benchFulfillmentUrl, max: PARTITIONS_IN_PARALLEL + 2 });
  const notifierPool = new Pool({ connectionString: benchNotifierUrl, max: 2 });
  await createBareTables(fulfillmentPool);
  if (options.peer) await setupPeerInbox(benchFulfillmentUrl);
  const kafka = testKafka('bench-consumers');
  const admin = kafka.admin();
  const receiver = new WebhookReceiver();
  const profileDir = options.profile ? mkdtempSync(join(tmpdir(), 'bench-consumers-profile-')) : undefined;
  const running: { stop(): Promise<unknown> }[] = [];
  const results: Drained[] = [];
  try {
    await admin.connect();
    await receiver.start();
    await ensureServiceTopics(kafka);
    await untilLeadersAnswer(admin);

    const consumers = [
      {
        name: 'bare kafkajs loop (baseline)',
        group: BARE_GROUP,
        effects: { pool: fulfillmentPool, table: 'bare_shipments', appliedInbox: appliedBy('bare', 'bare_inbox') },
        start: async () => {
          const bare = new BareConsumer(kafka, fulfillmentPool);
          running.push(bare);
          await bare.start();
          return bare;
        },
      },
      {
        name: 'fulfillment (apps/fulfillment)',
        group: 'fulfillment',
        effects: { pool: fulfillmentPool, table: 'shipments', appliedInbox: appliedBy('fulfillment') },
        start: () => startConsumerApp('fulfillment', { FULFILLMENT_DATABASE_URL: benchFulfillmentUrl }, profileDir),
      },
      ...(options.notifier
        ? [
            {
              name: 'notifier (apps/notifier, records webhooks)',
              group: 'notifier',
              effects: { pool: notifierPool, table: 'webhook_deliveries', appliedInbox: appliedBy('notifier') },
              start: () => startConsumerApp('notifier', { NOTIFIER_DATABASE_URL: benchNotifierUrl, WEBHOOK_URL: receiver.url }),
            },
          ]
        : []),
      ...(options.peer
        ? [
            {
              name: PEER_NAME,
              group: PEER_INBOX_GROUP,
              peer: true,
              effects: {
                pool: fulfillmentPool,
                table: PEER_INBOX_EFFECTS,
                appliedInbox: `${PEER_INBOX_TABLE} i ON i.id = p.id AND i.processed_at IS NOT NULL`,
                abandoned: `${PEER_INBOX_TABLE} WHERE abandoned_at IS NOT NULL`,
              },
              start: () => startPeerInbox(),
            },
          ]
        : []),
    ];
    /** The peer as a process of its own, as our apps run; its clock starts as it connects to Kafka. */
    async function startPeerInbox() {
      const child = spawn(
        process.execPath,
        [
          '-r',
          'ts-node/register/transpile-only',
          '-r',
          'tsconfig-paths/register',
          join(__dirname, 'peers', 'pg-transactional-outbox-inbox.ts'),
        ],
        {
          cwd: join(__dirname, '..'),
          env: { ...process.env, PEER_DATABASE_URL: benchFulfillmentUrl, PEER_KAFKA_BROKERS: process.env.KAFKA_BROKERS! },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let output = '';
      child.stderr!.on('data', (chunk) => (output += chunk));
      const peer = {
        process: child,
        output: () => output,
        stop: async () => {
          if (child.exitCode !== null || child.signalCode !== null) return;
          child.kill('SIGTERM');
          await new Promise((resolve) => child.once('exit', resolve));
        },
      };
      running.push(peer);
      await new Promise<void>((resolve, reject) => {
        child.stdout!.on('data', (chunk) => {
          output += chunk;
          if (String(chunk).includes('ready')) resolve();
        });
        child.once('exit', (code) => reject(new Error(`the peer exited with ${code} before it was ready:\n${output.slice(-2_000)}`)));
      });
      return peer;
    }
    async function startConsumerApp(app: 'fulfillment' | 'notifier', env: Record<string, string>, profile?: string) {
      const started = await startApp(
        app,
        // The notifier keeps NODE_ENV=test: production refuses a plain-http WEBHOOK_URL and the development secret.
        { ...(app === 'fulfillment' ? { NODE_ENV: 'production' } : {}), LOG_LEVEL: 'warn', KAFKA_SESSION_TIMEOUT_MS: '6000', ...env },
        { nodeArgs: profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`] : [] },
      );
      running.push(started);
      return started;
    }

    for (let round = 1; round <= options.rounds; round++) {
      progress(`round ${round}: producing a backlog of ${options.events} OrderPlaced events`);
      const backlog = await produceBacklog(kafka, admin, options.events);
      const order = round % 2 === 1 ? consumers : [...consumers].reverse();
      for (const consumer of order) {
        await pointGroupAt(admin, consumer.group, backlog);
        const lagAtStart = await groupLag(admin, consumer.group);
        progress(`round ${round}: ${consumer.name} drains ${lagAtStart} messages`);
        const isPeer = 'peer' in consumer;
        const found = isPeer ? peerFindings : problems;
        const startedAt = await dbNow(consumer.effects.pool);
        let instance: BareConsumer | (Pick<RunningApp, 'process' | 'output'> & { stop(): Promise<unknown> });
        let drained: Awaited<ReturnType<typeof awaitEffects>>;
        try {
          instance = await consumer.start();
          // An app's clock starts when it answers /health/live (its consumer is joining the group by
          // then), the peer's as it connects to Kafka.
          const from = instance instanceof BareConsumer ? startedAt : await dbNow(consumer.effects.pool);
          drained = await awaitEffects(consumer.effects, backlog, admin, consumer.group, from, found, `round ${round}, ${consumer.name}`);
        } catch (error) {
          if (!isPeer) throw error;
          peerFindings.push(`round ${round}: could not be measured: ${(error as Error).message.split('\n')[0]}`);
          await Promise.all(running.map((instance) => instance.stop()));
          running.length = 0;
          continue;
        }
        await instance.stop();
        running.splice(running.indexOf(instance), 1);
        if (!(instance instanceof BareConsumer)) {
          const { process: child, output } = instance;
          if (child.exitCode !== 0 && child.exitCode !== null)
            found.push(`${consumer.name} exited with ${child.exitCode}:\n${output().slice(-2000)}`);
        }
        results.push({
          name: consumer.name,
          round,
          events: options.events,
          ...drained,
          perSecond: options.events / drained.seconds,
          lagAtStart,
          vsBaseline: 0,
        });
      }
    }
    if (profileDir && options.profile) writeProfile(profileDir, options.profile);
  } finally {
    await Promise.all(running.map((instance) => instance.stop()));
    await admin.disconnect().catch(() => undefined);
    await receiver.stop();
    await fulfillmentPool.end();
    await notifierPool.end();
    if (profileDir && !process.env.BENCH_KEEP_PROFILE) rmSync(profileDir, { recursive: true, force: true });
    else if (profileDir) progress(`profiles kept in ${profileDir}`);
  }

  for (const result of results) {
    const baseline = results.find((r) => r.round === result.round && r.name === 'bare kafkajs loop (baseline)')!;
    result.vsBaseline = result.perSecond / baseline.perSecond;
  }
  const report: Report = {
    ok: problems.length === 0,
    machine,
    server,
    settings: { events: options.events, rounds: options.rounds, partitions: 6, sendBatch: SEND_BATCH },
    rounds: results,
    summary: summarise(results),
    problems,
    peer: options.peer
      ? {
          settings: {
            batch: PEER_BATCH_SIZE,
            pollMs: PEER_POLL_MS,
            lockMs: PEER_LOCK_MS,
            concurrency: 'parallel',
            storing: 'one transaction per fetched batch',
          },
          findings: peerFindings,
        }
      : undefined,
  };
  return { report, text: print(report), section: section(report) };
}

function writeProfile(dir: string, out: string): void {
  const files = readdirSync(dir)
    .filter((name) => name.endsWith('.cpuprofile'))
    .sort();
  if (!files.length) {
    progress('fulfillment wrote no CPU profile');
    return;
  }
  const file = files[files.length - 1];
  writeFileSync(out, flameGraph(JSON.parse(readFileSync(join(dir, file), 'utf8')), 'fulfillment draining a backlog (node --cpu-prof)'));
  progress(`flame graph written to ${out}`);
}

interface Summary {
  name: string;
  /** The median of the rounds (of two: their mean). Rounds alternate, so the machine's noise hits both sides. */
  perSecond: number;
  vsBaseline: number;
  firstToLastPerSecond: number;
}

function summarise(results: Drained[]): Summary[] {
  const names = [...new Set(results.map((r) => r.name))];
  const median = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    const middle = Math.floor(sorted.length / 2);
    return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
  };
  return names.map((name) => {
    const mine = results.filter((r) => r.name === name);
    return {
      name,
      perSecond: median(mine.map((r) => r.perSecond)),
      vsBaseline: median(mine.map((r) => r.vsBaseline)),
      firstToLastPerSecond: median(mine.map((r) => r.events / r.firstToLastSeconds)),
    };
  });
}

interface Report {
  ok: boolean;
  machine: Machine;
  server: string;
  settings: Record<string, number>;
  rounds: Drained[];
  summary: Summary[];
  problems: string[];
  peer?: { settings: Record<string, string | number>; findings: string[] };
}

function print(report: Report): string {
  const { machine, rounds, summary } = report;
  const lines = [
    `machine: ${machine.cpus} CPUs (${machine.cpuModel}), Node ${machine.node}, load average ${machine.loadAverage1m.toFixed(2)} at start; ${report.server}`,
    `backlog: ${report.settings.events} OrderPlaced events on ${report.settings.partitions} partitions, ${report.settings.rounds} rounds (order alternates)`,
    '',
    `${'round / consumer'.padEnd(50)} ${'events/s'.padStart(9)} ${'vs base'.padStart(8)} ${'1st->last/s'.padStart(12)} ${'lag start'.padStart(10)} ${'lag after'.padStart(10)} ${'lag 0 after'.padStart(12)}`,
    ...rounds.map(
      (r) =>
        `${`${r.round}  ${r.name}`.padEnd(50)} ${r.perSecond.toFixed(0).padStart(9)} ${`${r.vsBaseline.toFixed(2)}x`.padStart(8)} ${(r.events / r.firstToLastSeconds).toFixed(0).padStart(12)} ${String(r.lagAtStart).padStart(10)} ${String(r.lagAfter).padStart(10)} ${(r.lagZeroAfterMs === null ? '-' : `${r.lagZeroAfterMs} ms`).padStart(12)}`,
    ),
    '',
    'median of the rounds:',
    ...summary.map((s) => `  ${s.name.padEnd(47)} ${s.perSecond.toFixed(0).padStart(9)} ${`${s.vsBaseline.toFixed(2)}x`.padStart(8)}`),
    ...(report.peer?.findings.length ? ['', `peer pg-transactional-outbox (inbox): ${report.peer.findings.join('; ')}`] : []),
    '',
    report.ok
      ? 'OK: every event had exactly one effect and one inbox row, in every consumer'
      : `FAILED:\n${report.problems.map((p) => `  ${p}`).join('\n')}`,
  ];
  return lines.join('\n');
}

function peerTarget(report: Report, fulfillment: Summary): BenchSection['targets'] {
  if (!report.peer) return [];
  const peer = report.summary.find((s) => s.name === PEER_NAME);
  const findings = report.peer.findings.length ? `; the peer: ${report.peer.findings.join('; ')}` : '';
  return [
    {
      target: `fulfillment ahead of ${PEER_NAME}`,
      measured: peer
        ? `${(fulfillment.perSecond / peer.perSecond).toFixed(1)}x its rate (${Math.round(peer.perSecond)} events/s)${findings}`
        : `not measured${findings}`,
      met: peer !== undefined && fulfillment.perSecond > peer.perSecond,
    },
  ];
}

function section(report: Report): BenchSection {
  const fulfillment = report.summary.find((s) => s.name.startsWith('fulfillment'))!;
  const lastFulfillment = [...report.rounds].reverse().find((r) => r.name.startsWith('fulfillment'))!;
  return {
    id: 'consumers',
    title: 'Consumers catching up with a backlog',
    ok: report.ok,
    method:
      `Each round produces ${report.settings.events} OrderPlaced v1 events to the order topic as the relay does (key = order id, ` +
      "the relay's headers), then each consumer drains the same backlog from its start, in an order that alternates between " +
      'rounds: a bare kafkajs `eachBatch` loop in the bench process (baseline: one transaction per batch inserting the inbox rows ' +
      "ON CONFLICT DO NOTHING and the new rows' shipments, set-based; offsets committed after the commit; " +
      'four partitions at a time like the inbox consumer), the real fulfillment ' +
      'app, the real notifier (recording webhook deliveries while its dispatcher delivers them to a bare receiver), and the B5 ' +
      "peer: pg-transactional-outbox 0.5.7's inbox in polling mode, a process of its own doing fulfillment's effect (a kafkajs " +
      "consumer storing each message in its inbox with the library's storage, one transaction per fetched batch; its polling " +
      "listener applying each in a transaction of its own; batch 500, polling every 10 ms, parallel concurrency, its README's " +
      'attempt protections on). What the peer loses or gives up on is reported as a finding about it. Events/s ' +
      "from the consumer's start (live, joining the group) to the last effect's transaction timestamp on the database; every " +
      'event is checked to have exactly one effect and one inbox row. The median of the rounds is charted.',
    settings: report.settings,
    table: {
      columns: ['consumer', 'events/s (median)', 'vs baseline', 'events/s first to last effect'],
      rows: report.summary.map((s) => [s.name, Math.round(s.perSecond), `${s.vsBaseline.toFixed(2)}x`, Math.round(s.firstToLastPerSecond)]),
    },
    bars: report.summary.map((s) => ({ label: s.name, ratio: s.vsBaseline, value: `${Math.round(s.perSecond)}/s` })),
    targets: [
      {
        target: 'fulfillment >= 0.5x the bare consume-and-dedupe loop',
        measured: `${fulfillment.vsBaseline.toFixed(2)}x (${Math.round(fulfillment.perSecond)} events/s)`,
        met: fulfillment.vsBaseline >= 0.5,
      },
      {
        target: 'no lag left after the backlog',
        measured: `lag ${lastFulfillment.lagAtStart} at start, ${lastFulfillment.lagAfter} after (offsets at the end ${lastFulfillment.lagZeroAfterMs ?? '-'} ms after the last effect)`,
        met: report.rounds.every((r) => r.lagAfter === 0),
      },
      ...peerTarget(report, fulfillment),
    ],
    problems: report.problems,
  };
}

if (require.main === module) runAsMain({ usage, run });
