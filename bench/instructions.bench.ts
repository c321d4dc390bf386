/**
 * `npm run bench -- instructions`: what one request costs the process that serves it, counted in
 * instructions (valgrind's callgrind) rather than timed, for the command path, the bare-driver baseline
 * and the peer. A count does not depend on how fast this VM happens to be this hour (its CPU time per
 * request varies 2-3x; see docs/benchmarks.md), but it is not exact either: V8 collects garbage and
 * optimises in bursts, and whether one falls inside the counted requests moves a row. Two runs of 3,000
 * requests agreed within 1.4 % for first executions and within 4-15 % for the other rows (at 600
 * requests, up to 60 %). It says nothing about waiting (round trips,
 * locks, fsync): `commands` measures that. ~10 min; not part of `npm run bench`. Exit 0 all replies as
 * expected, 1 otherwise, 2 bad usage.
 */
import { apiEnv, benchOrdersUrl } from './bench-env'; // first: it points test/support's OrdersDb at the bench database
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface, Interface } from 'node:readline';
import { RunningApp, startApp } from '../test/support/apps';
import { buildForTests } from '../test/support/build';
import { OrdersDb } from '../test/support/orders-db';
import { testEnv } from '../test/support/test-env';
import { benchDatabaseName, describeServer, recreateBenchDatabase } from './bench-database';
import { Callgrind } from './callgrind';
import { describeMachine, Machine, runAsMain } from './cli';
import { closedLoop, KeepAliveClient } from './load';
import { benchArgs, integerFlag } from './options';
import { RunningPeer, startNodeIdempotencyPeer } from './peers/node-idempotency';
import { commandPathScenarios, Expectations, peerScenarios, replayCacheHits, Scenario, seedOrder } from './scenarios';
import { BenchResult, BenchSection, UsageError } from './section';

export const usage = 'usage: npm run bench -- instructions [--requests N (50-100000, default 3000)] [--json]';

/**
 * Every counted process runs V8 without background threads: its garbage collection and compiling
 * happen on the thread that is counted, in the same order every run (with them in the background the
 * count moved by 10-15 % from run to run; without, by under 1 %).
 */
const nodeArgs = ['--single-threaded'];
const CONCURRENCY = 16;
/** The scenarios of `commands` counted here, with the peer's. */
const COUNTED = ['first execution', 'replay', 'replay, from the database', 'peer: first execution', 'peer: replay'];

interface Row {
  name: string;
  measures: string;
  requests: number;
  /** Instructions the serving process executed per request (all its threads). */
  instructions: number;
  /** The bare driver's instructions per transaction divided by this row's: like a throughput ratio, higher is leaner. */
  vsBare: number;
  unexpected: number;
}

export interface InstructionsReport {
  ok: boolean;
  machine: Machine;
  server: string;
  settings: Record<string, string | number>;
  rows: Row[];
  problems: string[];
}

/** A process of ours, under callgrind, that a scenario's requests reach. */
interface Counted {
  pid: number;
  env: { USER?: string; HOST?: string };
}

const progress = (text: string) => process.stderr.write(`bench: ${text}\n`);

async function bench(requests: number, database: string): Promise<InstructionsReport> {
  const machine = describeMachine();
  progress(`recreating database ${database}, building, starting command-api, a second one and the peer under valgrind`);
  await recreateBenchDatabase(benchOrdersUrl, database);
  buildForTests();
  const server = await describeServer(benchOrdersUrl);
  const callgrind = new Callgrind();
  const launcher = callgrind.launcher;
  const db = new OrdersDb();
  const apps: RunningApp[] = [];
  let peer: RunningPeer | undefined;
  let bare: BareProcess | undefined;
  try {
    // Under valgrind a scenario takes minutes: receipts are kept in memory past the default minute, or
    // "replay" would count replays from the database.
    const api = await startApp('command-api', { ...apiEnv, IDEMPOTENCY_REPLAY_CACHE_SECONDS: '3600' }, { launcher, nodeArgs });
    apps.push(api);
    const uncached = await startApp('command-api', { ...apiEnv, IDEMPOTENCY_REPLAY_CACHE_SECONDS: '0' }, { launcher, nodeArgs });
    apps.push(uncached);
    peer = await startNodeIdempotencyPeer({ launcher, nodeArgs });
    const { tenantId, apiKey } = await db.tenant();
    bare = await BareProcess.start(launcher, apiKey);
    const appEnv = { USER: process.env.USER, HOST: '127.0.0.1' }; // startApp's HOST
    const check = new Expectations();
    const orderId = await seedOrder(api.url, apiKey);
    const scenarios = [
      ...commandPathScenarios(apiKey, orderId, CONCURRENCY, check, { url: uncached.url, pid: uncached.process.pid! }),
      ...peerScenarios({ url: peer.url, pid: peer.pid }, CONCURRENCY, check),
    ].filter((scenario) => COUNTED.includes(scenario.name));
    const counted = (scenario: Scenario): Counted =>
      scenario.target?.pid === peer!.pid
        ? { pid: peer!.pid, env: { USER: process.env.USER, HOST: process.env.HOST } }
        : { pid: scenario.target?.pid ?? api.process.pid!, env: appEnv };

    // Warm-up at the speed of valgrind's core, instrumentation off: the JIT settles before anything is counted.
    const warmup = Math.max(2000, requests);
    progress(`warming up (not counted): ${warmup} requests per scenario`);
    await bare.run('warmup-bare', warmup);
    for (const scenario of scenarios) await drive(scenario, 'warmup', warmup, api.url);

    progress(`counting: ${requests} requests per scenario`);
    const bareCount = await callgrind.count(bare.pid, { USER: process.env.USER, HOST: process.env.HOST }, () =>
      bare!.run('measured-bare', requests),
    );
    const rows: Row[] = [];
    const add = (name: string, measures: string, count: number) =>
      rows.push({
        name,
        measures,
        requests,
        instructions: count / requests,
        vsBare: bareCount / count,
        unexpected: check.unexpected.get(name) ?? 0,
      });
    add('bare pg driver', "the baseline: a first execution's transaction through the bare pg driver, in a process of its own", bareCount);
    const problems: string[] = [];
    for (const scenario of scenarios) {
      const { pid, env } = counted(scenario);
      const hitsBefore = await replayCacheHits(api.managementUrl);
      add(scenario.name, scenario.measures, await callgrind.count(pid, env, () => drive(scenario, 'measured', requests, api.url)));
      const hits = (await replayCacheHits(api.managementUrl)) - hitsBefore;
      const expectedHits = scenario.name === 'replay' ? requests : 0;
      if (hits !== expectedHits) problems.push(`${scenario.name}: ${hits} replies from the replay cache, expected ${expectedHits}`);
    }

    problems.push(...check.examples);
    if (check.total > check.examples.length) problems.push(`… ${check.total - check.examples.length} more unexpected replies`);
    const firstExecutions = 1 + 2 * (warmup + requests); // the seed, then the bare driver's and the API's
    const counts = await db.counts(tenantId);
    const expected = { orders: firstExecutions, receipts: firstExecutions, outbox: firstExecutions };
    if (JSON.stringify(counts) !== JSON.stringify(expected)) {
      problems.push(
        `database: expected ${JSON.stringify(expected)} (one order, receipt and outbox row per key), found ${JSON.stringify(counts)}`,
      );
    }
    return {
      ok: problems.length === 0,
      machine,
      server,
      settings: {
        requests,
        warmup,
        concurrency: CONCURRENCY,
        DATABASE_POOL_SIZE: apiEnv.DATABASE_POOL_SIZE,
        LOG_LEVEL: apiEnv.LOG_LEVEL,
        database,
      },
      rows,
      problems,
    };
  } finally {
    await bare?.stop();
    await peer?.stop();
    await Promise.all(apps.map((app) => app.stop()));
    await db.close();
    callgrind.close();
  }
}

async function drive(scenario: Scenario, phase: 'warmup' | 'measured', requests: number, apiUrl: string): Promise<void> {
  const client = new KeepAliveClient(scenario.target?.url ?? apiUrl, scenario.connections);
  try {
    await closedLoop(scenario.units(requests), scenario.workers, (i) => scenario.unit(client, phase, i));
  } finally {
    client.close();
  }
}

/** bare-driver-process.ts under the launcher: runs the baseline's transactions on request. */
class BareProcess {
  private constructor(
    private readonly child: ChildProcess,
    private readonly lines: Interface,
  ) {}

  get pid(): number {
    return this.child.pid!;
  }

  static async start(launcher: string[], apiKey: string): Promise<BareProcess> {
    const [command, ...args] = [
      ...launcher,
      process.execPath,
      ...nodeArgs,
      '-r',
      'ts-node/register/transpile-only',
      '-r',
      'tsconfig-paths/register',
      join(__dirname, 'bare-driver-process.ts'),
    ];
    const child = spawn(command, args, {
      cwd: join(__dirname, '..'),
      env: { ...process.env, BENCH_ORDERS_DATABASE_URL: benchOrdersUrl, BENCH_API_KEY: apiKey, BENCH_POOL_SIZE: apiEnv.DATABASE_POOL_SIZE },
      stdio: ['pipe', 'pipe', 'ignore'], // valgrind's own report
    });
    const bare = new BareProcess(child, createInterface({ input: child.stdout! }));
    await bare.answer('ready');
    return bare;
  }

  async run(prefix: string, transactions: number): Promise<void> {
    this.child.stdin!.write(`${prefix} ${transactions} ${CONCURRENCY}\n`);
    await this.answer('done');
  }

  async stop(): Promise<void> {
    this.child.stdin!.end();
    if (this.child.exitCode === null && this.child.signalCode === null) {
      await new Promise((resolve) => {
        const timer = setTimeout(() => this.child.kill('SIGKILL'), 30_000);
        this.child.once('exit', () => resolve(clearTimeout(timer)));
      });
    }
  }

  private answer(expected: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const onExit = () => reject(new Error(`the bare-driver process exited (code ${this.child.exitCode})`));
      this.child.once('exit', onExit);
      this.lines.once('line', (line) => {
        this.child.removeListener('exit', onExit);
        if (line === expected) resolve();
        else reject(new Error(`the bare-driver process: ${line}`));
      });
    });
  }
}

/** How many replies the command-api answered from its replay cache so far (its /metrics). */
const thousands = (n: number) => `${Math.round(n / 1000).toLocaleString('en-US')}k`;

function printTable(report: InstructionsReport): string {
  const header = ['scenario', 'requests', 'instructions/req', 'vs bare', 'unexpected'];
  const rows = report.rows.map((r) => [
    r.name,
    String(r.requests),
    thousands(r.instructions),
    `${r.vsBare.toFixed(2)}x`,
    String(r.unexpected),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [
    `machine:  ${report.machine.cpus} CPUs (${report.machine.cpuModel}), Node ${report.machine.node}; counted by valgrind's callgrind`,
    `server:   ${report.server}`,
    `settings: ${Object.entries(report.settings)
      .map(([name, value]) => `${name}=${value}`)
      .join(', ')}`,
    '',
    line(header),
    ...rows.map(line),
    '',
    ...report.rows.map((r) => `${r.name.padEnd(widths[0])}  ${r.measures}`),
    '',
    report.ok ? 'OK: every reply was what the contract says' : `PROBLEMS:\n${report.problems.join('\n')}`,
  ].join('\n');
}

/** Issue 12's B5 in instructions: fewer per request than the peer's same scenario. */
function leanerThanPeer(report: InstructionsReport, ours: string, peers: string) {
  const mine = report.rows.find((r) => r.name === ours);
  const peer = report.rows.find((r) => r.name === peers);
  if (!mine || !peer) return [];
  return [
    {
      target: `${ours}: fewer instructions per request than @node-idempotency/nestjs (${peers})`,
      measured: `${(mine.instructions / peer.instructions).toFixed(2)}x its count (${thousands(mine.instructions)} vs ${thousands(peer.instructions)})`,
      met: mine.instructions < peer.instructions,
    },
  ];
}

function section(report: InstructionsReport): BenchSection {
  return {
    id: 'instructions',
    title: 'Instructions per request (command-api, bare driver and peer, counted by callgrind)',
    ok: report.ok,
    method:
      'The processes of `commands` (the command-api, a second one with its replay cache off, the peer, and the bare-driver ' +
      "baseline as a process of its own) run under valgrind's callgrind, instrumentation off while they start and warm up; " +
      "then, one scenario at a time, it counts the instructions the serving process executes over the scenario's requests " +
      '(same closed loop and checks as `commands`). A count, not a time: it does not move with the speed of the VM (the timed ' +
      'ratios of `commands` drift with it), but not exact: garbage collection and optimisation come in bursts, and whether ' +
      'one falls inside the counted requests moves a row (two runs of 3,000 requests: within 1.4 % for first executions, ' +
      '4-15 % for the other rows). It leaves ' +
      "out what a request waits for (round trips, PostgreSQL's own work, the kernel's). Every counted process runs V8 with " +
      '`--single-threaded`, so its garbage collection and compiling are counted too, in the same order every run. ' +
      '"vs bare": the bare driver\'s count per transaction over the row\'s (higher is leaner).',
    settings: report.settings,
    table: {
      columns: ['scenario', 'instructions/req', 'vs bare', 'unexpected'],
      rows: report.rows.map((r) => [r.name, thousands(r.instructions), `${r.vsBare.toFixed(2)}x`, r.unexpected]),
    },
    bars: report.rows.map((r) => ({ label: r.name, ratio: r.vsBare, value: `${thousands(r.instructions)} instructions` })),
    targets: [
      ...leanerThanPeer(report, 'first execution', 'peer: first execution'),
      ...leanerThanPeer(report, 'replay', 'peer: replay'),
      ...leanerThanPeer(report, 'replay, from the database', 'peer: replay'),
    ],
    problems: report.problems,
  };
}

function cannotRun(): string | undefined {
  return Callgrind.available() ? undefined : 'valgrind is not installed (it counts the instructions; Debian: apt-get install valgrind)';
}

export async function run(argv: string[]): Promise<BenchResult> {
  const values = benchArgs(argv, { requests: { type: 'string' } });
  const requests = integerFlag('--requests', values.requests as string | undefined, 3000, 50, 100_000);
  const database = benchDatabaseName(benchOrdersUrl);
  if (!database || testEnv.ordersUrl !== benchOrdersUrl) {
    throw new UsageError(`BENCH_ORDERS_DATABASE_URL must name a database of its own containing "bench" (it is dropped): ${benchOrdersUrl}`);
  }
  const reason = cannotRun();
  if (reason) throw new Error(reason);
  const report = await bench(requests, database);
  return { report, text: printTable(report), section: section(report) };
}

if (require.main === module) runAsMain({ usage, run });
