/**
 * `npm run bench -- webhooks`: how fast the notifier delivers webhooks, as a ratio to a bare loop doing
 * the same POSTs in the same run, and how it keeps up with a sustained order rate.
 *
 * 1. baseline: a bare `node:http` loop (same concurrency, kept-alive connections, each POST signed like the dispatcher signs it) to
 *    a bare receiver that answers 200 (test/support/webhook-receiver.ts): what this machine and Node's
 *    HTTP client do without any database.
 * 2. the dispatcher draining N pending deliveries (seeded in one transaction; a fifth of the orders
 *    with a second event, whose order is checked at the receiver) to the bare receiver, then to the
 *    reference receiver (apps/webhook-receiver: verifies, dedupes in its table, answers 204).
 * 3. sustained: order events produced to Kafka at R/s for S seconds; the notifier consumes, records and
 *    delivers to the reference receiver. Latency from the event's production to the receiver's commit,
 *    and how long after the last event the last webhook arrived.
 * Exit 0 when every webhook arrived once and in order, 1 otherwise, 2 on bad usage.
 */
import { benchNotifierUrl, benchReceiverUrl } from './bench-env'; // first: it points test/support at the bench databases
import { randomUUID } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Producer } from 'kafkajs';
import { Pool } from 'pg';
import { Webhook } from 'standardwebhooks';
import { DEVELOPMENT_WEBHOOK_SECRET, OrderEventTypes, Topics, WebhookHeaders } from '@app/contracts';
import { RunningApp, startApp } from '../test/support/apps';
import { buildForTests } from '../test/support/build';
import { ensureServiceTopics, produceOrderEvent, skipConsumerBacklog, testKafka } from '../test/support/kafka';
import { WebhookReceiver } from '../test/support/webhook-receiver';
import { prepareBenchDatabases } from './bench-database';
import { percentile } from './load';
import { describeMachine, Machine, runAsMain } from './cli';
import { benchArgs, integerFlag } from './options';
import { BenchResult, BenchSection } from './section';

const CONCURRENCY = 64;
const progress = (text: string) => process.stderr.write(`bench: ${text}\n`);

interface Options {
  deliveries: number;
  rate: number;
  seconds: number;
  json: boolean;
}

export const usage =
  'usage: npm run bench -- webhooks [--deliveries N (100-1000000, default 5000)] [--rate N/s (default 200)] [--seconds N (default 30)] [--json]';

function parseOptions(argv: string[]): Options {
  const values = benchArgs(argv, { deliveries: { type: 'string' }, rate: { type: 'string' }, seconds: { type: 'string' } });
  return {
    deliveries: integerFlag('--deliveries', values.deliveries, 5_000, 100, 1_000_000),
    rate: integerFlag('--rate', values.rate, 200, 1, 10_000),
    seconds: integerFlag('--seconds', values.seconds, 30, 1, 3_600),
    json: values.json,
  };
}

interface Throughput {
  name: string;
  deliveries: number;
  seconds: number;
  perSecond: number;
  vsBaseline: number;
}

/** The bare loop: `n` signed POSTs at CONCURRENCY with Node's http client (the dispatcher's), kept-alive connections, no database. */
async function bareLoop(url: string, n: number): Promise<{ seconds: number }> {
  const signer = new Webhook(DEVELOPMENT_WEBHOOK_SECRET);
  const agent = new HttpAgent({ keepAlive: true });
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n) {
        const i = next++;
        const id = randomUUID();
        const body = JSON.stringify({ type: 'order.placed', timestamp: new Date().toISOString(), data: { orderId: randomUUID(), n: i } });
        const now = new Date();
        const status = await new Promise<number>((resolve, reject) => {
          const request = httpRequest(
            url,
            {
              method: 'POST',
              agent,
              headers: {
                'content-type': 'application/json',
                'content-length': String(Buffer.byteLength(body)),
                [WebhookHeaders.id]: id,
                [WebhookHeaders.timestamp]: String(Math.floor(now.getTime() / 1000)),
                [WebhookHeaders.signature]: signer.sign(id, now, body),
              },
            },
            (response) => {
              response.resume();
              response.once('end', () => resolve(response.statusCode ?? 0));
            },
          );
          request.once('error', reject);
          request.end(body);
        });
        if (status !== 200) throw new Error(`bare receiver answered ${status}`);
      }
    }),
  );
  agent.destroy();
  return { seconds: (performance.now() - started) / 1000 };
}

/**
 * Seeds `n` pending deliveries in one transaction (a fifth of the orders get a second event right
 * behind the first) and waits until the running dispatcher delivered them all. The clock starts at
 * the commit and stops at the last `delivered_at`, both read on the database.
 */
async function drainSeeded(
  notifier: Pool,
  url: string,
  n: number,
  problems: string[],
): Promise<{ seconds: number; orders: Map<string, string[]> }> {
  const tenantId = `bench-${randomUUID().slice(0, 8)}`;
  const rows: { id: string; orderId: string; type: string }[] = [];
  while (rows.length < n) {
    const orderId = randomUUID();
    rows.push({ id: randomUUID(), orderId, type: 'OrderPlaced' });
    if (rows.length < n && rows.length % 5 === 0) rows.push({ id: randomUUID(), orderId, type: 'OrderCancelled' });
  }
  const orders = new Map<string, string[]>();
  for (const row of rows) orders.set(row.orderId, [...(orders.get(row.orderId) ?? []), row.id]);
  const {
    rows: [{ committed }],
  } = await notifier.query(
    /* sql */ `
    WITH seeded AS (
      INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, event_type, url, payload, state, next_attempt_at)
      SELECT id, $1, order_id, type, $2,
             json_build_object('type', CASE type WHEN 'OrderPlaced' THEN 'order.placed' ELSE 'order.cancelled' END,
                               'timestamp', now(), 'data', json_build_object('orderId', order_id, 'tenantId', $1::text,
                               'sku', 'BENCH', 'quantity', 1, 'customerRef', NULL, 'placedAt', now(), 'reason', 'bench', 'cancelledAt', now()))::text,
             'pending', now()
      FROM unnest($3::uuid[], $4::uuid[], $5::text[]) WITH ORDINALITY AS r(id, order_id, type, n)
      ORDER BY n
      RETURNING 1)
    SELECT clock_timestamp() AS committed, (SELECT count(*) FROM seeded) AS n`,
    [tenantId, url, rows.map((r) => r.id), rows.map((r) => r.orderId), rows.map((r) => r.type)],
  );
  const deadline = Date.now() + 600_000;
  for (;;) {
    const {
      rows: [state],
    } = await notifier.query(
      `SELECT count(*) FILTER (WHERE state = 'delivered')::int AS delivered, count(*) FILTER (WHERE state = 'dead')::int AS dead,
              max(delivered_at) AS last FROM webhook_deliveries WHERE tenant_id = $1`,
      [tenantId],
    );
    if (state.delivered + state.dead >= n) {
      if (state.dead > 0) problems.push(`${state.dead} deliveries to ${url} are dead`);
      return { seconds: (state.last.getTime() - committed.getTime()) / 1000, orders };
    }
    if (Date.now() > deadline) throw new Error(`not drained in 10 minutes: ${state.delivered} of ${n} delivered`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Every seeded webhook arrived exactly once, each order's in the order of its events. */
function checkArrivals(
  arrivals: { id: string; orderId: string }[],
  orders: Map<string, string[]>,
  where: string,
  problems: string[],
): void {
  const seen = new Map<string, number>();
  const byOrder = new Map<string, string[]>();
  for (const arrival of arrivals) {
    seen.set(arrival.id, (seen.get(arrival.id) ?? 0) + 1);
    byOrder.set(arrival.orderId, [...(byOrder.get(arrival.orderId) ?? []), arrival.id]);
  }
  let missing = 0;
  let repeated = 0;
  let outOfOrder = 0;
  for (const [orderId, ids] of orders) {
    for (const id of ids) {
      const count = seen.get(id) ?? 0;
      if (count === 0) missing++;
      if (count > 1) repeated++;
    }
    const firsts = [...new Set(byOrder.get(orderId) ?? [])];
    if (firsts.join() !== ids.filter((id) => seen.has(id)).join()) outOfOrder++;
  }
  if (missing || outOfOrder) problems.push(`${where}: ${missing} webhooks missing, ${outOfOrder} orders out of order`);
  if (repeated)
    problems.push(`${where}: ${repeated} webhooks arrived more than once (at least once is allowed, but no fault was injected)`);
}

export async function run(argv: string[]): Promise<BenchResult> {
  const options = parseOptions(argv);
  const machine = describeMachine();
  progress('recreating the bench databases, building');
  await prepareBenchDatabases([
    [benchNotifierUrl, 'BENCH_NOTIFIER_DATABASE_URL', 'notifier'],
    [benchReceiverUrl, 'BENCH_WEBHOOK_RECEIVER_DATABASE_URL', 'receiver'],
  ]);
  buildForTests();

  const problems: string[] = [];
  const bare = new WebhookReceiver(); // a receiver with no work at all: records what arrived, answers 200
  const notifierPool = new Pool({ connectionString: benchNotifierUrl, max: 2 });
  const receiverPool = new Pool({ connectionString: benchReceiverUrl, max: 2 });
  const kafka = testKafka('bench-webhooks');
  const apps: RunningApp[] = [];
  let producer: Producer | undefined;
  try {
    await bare.start();
    await ensureServiceTopics(kafka);
    await skipConsumerBacklog(kafka, ['notifier'], Topics.orderEvents);
    const receiver = await startApp('webhook-receiver', { LOG_LEVEL: 'warn', WEBHOOK_RECEIVER_DATABASE_URL: benchReceiverUrl });
    apps.push(receiver);
    const receiverUrl = `${receiver.url}/webhooks/orders`;
    const startNotifier = async (url: string) => {
      const app = await startApp('notifier', {
        LOG_LEVEL: 'warn',
        NOTIFIER_DATABASE_URL: benchNotifierUrl,
        WEBHOOK_URL: url,
        WEBHOOK_CONCURRENCY: String(CONCURRENCY),
        KAFKA_SESSION_TIMEOUT_MS: '6000',
      });
      apps.push(app);
      return app;
    };

    progress(`warming up (${Math.min(1_000, options.deliveries)} POSTs each way)`);
    await bareLoop(bare.url, Math.min(1_000, options.deliveries));
    let notifier = await startNotifier(bare.url);
    await drainSeeded(notifierPool, bare.url, Math.min(1_000, options.deliveries), []);
    bare.requests.length = 0;

    progress(`baseline: ${options.deliveries} signed POSTs from a bare node:http loop`);
    const baseline = await bareLoop(bare.url, options.deliveries);
    bare.requests.length = 0;
    const results: Throughput[] = [
      {
        name: 'bare node:http loop -> bare receiver (baseline)',
        deliveries: options.deliveries,
        seconds: baseline.seconds,
        perSecond: options.deliveries / baseline.seconds,
        vsBaseline: 1,
      },
    ];

    progress(`dispatcher: ${options.deliveries} deliveries to the bare receiver`);
    const toBare = await drainSeeded(notifierPool, bare.url, options.deliveries, problems);
    checkArrivals(
      bare.requests.map((r) => ({ id: String(r.headers['webhook-id']), orderId: r.body.data.orderId })),
      toBare.orders,
      'bare receiver',
      problems,
    );
    results.push({
      name: 'notifier dispatcher -> bare receiver',
      deliveries: options.deliveries,
      seconds: toBare.seconds,
      perSecond: options.deliveries / toBare.seconds,
      vsBaseline: 0,
    });

    await notifier.stop();
    notifier = await startNotifier(receiverUrl);
    progress(`dispatcher: ${options.deliveries} deliveries to the reference receiver`);
    const toReference = await drainSeeded(notifierPool, receiverUrl, options.deliveries, problems);
    const { rows: received } = await receiverPool.query(
      `SELECT webhook_id AS id, order_id::text AS "orderId" FROM received_webhooks ORDER BY received_at, webhook_id`,
    );
    const referenceArrivals = received.filter((row) => toReference.orders.has(row.orderId));
    checkArrivals(referenceArrivals, toReference.orders, 'reference receiver', problems);
    results.push({
      name: 'notifier dispatcher -> reference receiver',
      deliveries: options.deliveries,
      seconds: toReference.seconds,
      perSecond: options.deliveries / toReference.seconds,
      vsBaseline: 0,
    });
    for (const result of results) result.vsBaseline = result.perSecond / results[0].perSecond;

    progress(`sustained: ${options.rate} order events/s for ${options.seconds} s through Kafka, the notifier and the reference receiver`);
    producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const tenantId = `bench-sustained-${randomUUID().slice(0, 8)}`;
    const produced: string[] = [];
    let lastProduced = 0;
    const started = Date.now();
    const tickMs = 50;
    for (let tick = 0; Date.now() - started < options.seconds * 1000; tick++) {
      const due = Math.floor(((tick + 1) * tickMs * options.rate) / 1000) - produced.length;
      await Promise.all(
        Array.from({ length: due }, () => {
          const orderId = randomUUID();
          const now = new Date().toISOString();
          return produceOrderEvent(producer!, {
            type: OrderEventTypes.placed,
            tenantId,
            key: orderId,
            payload: { orderId, tenantId, sku: 'BENCH', quantity: 1, customerRef: null, placedAt: now },
          }).then((id) => {
            produced.push(id);
            lastProduced = Date.now();
          });
        }),
      );
      const wait = started + (tick + 1) * tickMs - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    const deadline = Date.now() + 300_000;
    let latencies: number[] = [];
    for (;;) {
      const { rows } = await receiverPool.query(
        `SELECT extract(epoch FROM received_at - (payload->>'timestamp')::timestamptz) * 1000 AS ms, received_at FROM received_webhooks WHERE tenant_id = $1`,
        [tenantId],
      );
      if (rows.length >= produced.length || Date.now() > deadline) {
        latencies = rows.map((row) => Number(row.ms)).sort((a, b) => a - b);
        const lastAt = Math.max(...rows.map((row) => row.received_at.getTime()));
        if (rows.length < produced.length)
          problems.push(`sustained: ${produced.length - rows.length} of ${produced.length} webhooks never arrived`);
        const sustained = {
          rate: options.rate,
          seconds: options.seconds,
          events: produced.length,
          p50Ms: percentile(latencies, 0.5),
          p95Ms: percentile(latencies, 0.95),
          p99Ms: percentile(latencies, 0.99),
          maxMs: latencies[latencies.length - 1],
          lastArrivedAfterLastEventMs: Math.max(0, lastAt - lastProduced),
        };
        const report = {
          ok: problems.length === 0,
          machine,
          settings: { WEBHOOK_CONCURRENCY: CONCURRENCY, deliveries: options.deliveries },
          throughput: results,
          sustained,
          problems,
        };
        return { report, text: print(report), section: section(report) };
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  } finally {
    await producer?.disconnect().catch(() => undefined);
    await Promise.all(apps.map((app) => app.stop()));
    await bare.stop();
    await notifierPool.end();
    await receiverPool.end();
  }
}

interface Report {
  ok: boolean;
  machine: Machine;
  settings: { WEBHOOK_CONCURRENCY: number; deliveries: number };
  throughput: Throughput[];
  sustained: Record<string, number>;
  problems: string[];
}

function print(report: Report): string {
  const { machine, throughput, sustained } = report;
  const lines = [
    `machine: ${machine.cpus} CPUs (${machine.cpuModel}), Node ${machine.node}, load average ${machine.loadAverage1m.toFixed(2)} at start; ` +
      'notifier, receivers, PostgreSQL, Kafka and this load generator share it',
    `WEBHOOK_CONCURRENCY=${CONCURRENCY}`,
    '',
    `${'webhook delivery'.padEnd(50)} ${'webhooks'.padStart(9)} ${'seconds'.padStart(8)} ${'per s'.padStart(8)} ${'vs base'.padStart(8)}`,
    ...throughput.map(
      (t) =>
        `${t.name.padEnd(50)} ${String(t.deliveries).padStart(9)} ${t.seconds.toFixed(2).padStart(8)} ${t.perSecond.toFixed(0).padStart(8)} ${`${t.vsBaseline.toFixed(2)}x`.padStart(8)}`,
    ),
    '',
    `sustained ${sustained.rate} events/s for ${sustained.seconds} s (${sustained.events} OrderPlaced via Kafka -> notifier -> reference receiver):`,
    `  produce -> receiver commit: p50 ${sustained.p50Ms.toFixed(0)} ms, p95 ${sustained.p95Ms.toFixed(0)} ms, p99 ${sustained.p99Ms.toFixed(0)} ms, max ${sustained.maxMs.toFixed(0)} ms`,
    `  the last webhook was stored ${sustained.lastArrivedAfterLastEventMs} ms after the last event was produced (0: no backlog left)`,
    '',
    report.ok ? 'OK: every webhook arrived once, each order in order' : `FAILED:\n${report.problems.map((p) => `  ${p}`).join('\n')}`,
  ];
  return lines.join('\n');
}

function section(report: Report): BenchSection {
  const { throughput, sustained } = report;
  return {
    id: 'webhooks',
    title: 'Webhook delivery (notifier)',
    ok: report.ok,
    method:
      `The notifier's dispatcher drains ${report.settings.deliveries} pending deliveries (seeded in one transaction, a fifth of the ` +
      'orders with a second event whose order is checked) to a bare receiver that only answers 200, then to the reference ' +
      'receiver (verifies the signature, dedupes in its table). Baseline: a bare `node:http` loop (kept-alive connections, as the dispatcher keeps them) sending the same signed POSTs ' +
      `at the same concurrency. Then order events produced to Kafka at ${sustained.rate}/s for ${sustained.seconds} s: latency ` +
      "from the event's production to the receiver's commit.",
    settings: report.settings,
    table: {
      columns: ['webhook delivery', 'webhooks', 'per s', 'vs baseline'],
      rows: throughput.map((t) => [t.name, t.deliveries, Math.round(t.perSecond), `${t.vsBaseline.toFixed(2)}x`]),
    },
    bars: throughput.map((t) => ({ label: t.name, ratio: t.vsBaseline, value: `${Math.round(t.perSecond)}/s` })),
    targets: [
      {
        target: `${sustained.rate} events/s sustained without a backlog`,
        measured: `p50 ${sustained.p50Ms.toFixed(0)} ms, p99 ${sustained.p99Ms.toFixed(0)} ms produce -> receiver commit; last webhook ${sustained.lastArrivedAfterLastEventMs} ms after the last event`,
        met: sustained.lastArrivedAfterLastEventMs < 1_000,
      },
    ],
    problems: report.problems,
  };
}

if (require.main === module) runAsMain({ usage, run });
