/**
 * B5 peer for the command benchmark: `POST /v1/orders` made idempotent by `@node-idempotency/nestjs`
 * 1.0.4 with its Redis store, in a NestJS 10 app of its own (bench/peers/node-idempotency/, own
 * package.json and lock: the library declares NestJS 9/10 peers, the repository is on 11). The
 * handler runs our business transaction through the bare `pg` driver (pool of 10): the order and its
 * outbox row in one PostgreSQL transaction, on its own database migrated like ours.
 *
 * What it does NOT guarantee that ours does (read in the library's source, 1.0.4; unchanged on its
 * main branch as of 1.0.8 except an opt-in wait for in-progress keys):
 * - The stored response is not written with the effect. The key is claimed in Redis (`SET NX`,
 *   status IN_PROGRESS, TTL 24 h) before the handler and completed by a second `SET` after the
 *   PostgreSQL commit. A crash, or a Redis error, between the commit and that `SET` leaves the key
 *   IN_PROGRESS for 24 h: every retry gets 409, the order exists, the client never learns its id.
 *   A crash before the commit does the same with no order: the key is blocked for a day although
 *   nothing happened (ours rolls the claim back with the effect; a retry executes).
 * - Failures are cached: the handler's error (a 500 from a lost database connection, a 400, a 409)
 *   is stored as the key's outcome and replayed for 24 h (seen here: a retry after a transient
 *   database error got `500` with `Idempotent-Replayed: true`). Ours stores nothing when the transaction
 *   fails, so a retry after a transient fault executes.
 * - Racing duplicates are not made to wait: while the first request runs, the others get
 *   `409 {"statusCode":409,"message":"A request is outstanding for this Idempotency-Key"}` with
 *   `Retry-After: 1` at once (ours waits on the receipt's row lock and replays, 409 only after
 *   lock_timeout).
 * - Replays carry the stored status, body and Content-Type only, plus `Idempotent-Replayed: true`:
 *   not the Location header.
 * - Scope is `method:url:key` (the URL with its query string), with no tenant or caller: two callers
 *   sending one key to one path share a receipt (and see each other's response). The fingerprint
 *   hashes the raw parsed body (`JSON.stringify`, key order matters), not declared semantic fields.
 * - Durability is Redis's: here AOF with fsync every second (see startRedis), so an OS crash or a
 *   power loss can forget about the last second of receipts while their orders stay committed in
 *   PostgreSQL: retries of those keys create second orders. Ours commits the receipt with the order.
 * - If the key expires between the losing `SET NX` and its `GET`, the request runs with no claim at all.
 * The peer has no authentication (one fixed tenant); ours authenticates every request (cached).
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { freePort } from '../../test/support/free-port';
import { benchDatabaseName, recreateBenchDatabase } from '../bench-database';

export const peerOrdersUrl = process.env.BENCH_PEER_ORDERS_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/bench_peer_orders';
/** This peer's own Redis: nothing else may use the port. */
export const PEER_REDIS_PORT = 26379;
const POOL_SIZE = 10; // as the command benchmark gives the command-api
const peerDir = join(__dirname, 'node-idempotency');

export interface RunningPeer {
  /** Base URL: the peer answers `POST ${url}/v1/orders`. */
  url: string;
  /** The peer app's own process (not Redis's), for /proc/<pid>/stat. */
  pid: number;
  database: string;
  /** Stops the app, then Redis, and deletes Redis's data. */
  stop(): Promise<void>;
}

/** Installs the peer's locked dependencies if missing, recreates its database, starts its Redis and the app. */
export async function startNodeIdempotencyPeer(options: { launcher?: string[]; nodeArgs?: string[] } = {}): Promise<RunningPeer> {
  const [command, ...launcherArgs] = [...(options.launcher ?? []), process.execPath, ...(options.nodeArgs ?? [])];
  const database = benchDatabaseName(peerOrdersUrl);
  if (!database)
    throw new Error(`BENCH_PEER_ORDERS_DATABASE_URL must name a database containing "bench" (it is dropped): ${peerOrdersUrl}`);
  installDependencies();
  await recreateBenchDatabase(peerOrdersUrl, database);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const redis = await startRedis();
  let app: Child;
  try {
    app = await startChild(
      'peer app',
      command,
      [...launcherArgs, join(peerDir, 'src', 'main.js')],
      {
        cwd: peerDir,
        env: {
          ...process.env,
          NODE_ENV: 'production',
          PORT: String(port),
          DATABASE_URL: peerOrdersUrl,
          REDIS_URL: redis.url,
          DATABASE_POOL_SIZE: String(POOL_SIZE),
        },
      },
      () => answers(url),
      options.launcher ? 180_000 : 30_000,
    );
  } catch (error) {
    await redis.stop();
    throw error;
  }
  return {
    url,
    pid: app.process.pid!,
    database,
    stop: async () => {
      await app.stop();
      await redis.stop();
    },
  };
}

export interface PeerOrderCounts {
  /** Orders whose outbox row names one of the keys (all orders when no prefix is given). */
  orders: number;
  /** Distinct keys with at least one order. */
  keys: number;
  /** orders - keys: effects a retried or racing key created beyond its first. */
  duplicateOrders: number;
  /** Up to 10 keys with more than one order. */
  duplicatedKeys: { key: string; orders: number }[];
}

/**
 * Orders per idempotency key in the peer's database, for keys starting with `keyPrefix` (all when
 * empty). The peer keeps its keys in Redis, so it writes each order's key into the order's outbox
 * row (`headers->>'idempotency-key'`); order and outbox row commit together.
 */
export async function countPeerOrders(keyPrefix = ''): Promise<PeerOrderCounts> {
  const client = new Client({ connectionString: peerOrdersUrl, application_name: 'bench' });
  await client.connect();
  try {
    const { rows } = await client.query<{ key: string; orders: number }>(
      /* sql */ `
      SELECT m.headers->>'idempotency-key' AS key, count(*)::int AS orders
      FROM orders o JOIN outbox_messages m ON m.message_key = o.id::text
      WHERE left(m.headers->>'idempotency-key', length($1)) = $1
      GROUP BY 1`,
      [keyPrefix],
    );
    const orders = rows.reduce((sum, row) => sum + row.orders, 0);
    const duplicated = rows.filter((row) => row.orders > 1);
    return {
      orders,
      keys: rows.length,
      duplicateOrders: orders - rows.length,
      duplicatedKeys: duplicated.slice(0, 10),
    };
  } finally {
    await client.end();
  }
}

let installed = false;

/** `npm ci` in the peer's folder when its node_modules is missing (quietly, once per process). */
function installDependencies(): void {
  if (installed || existsSync(join(peerDir, 'node_modules', '.package-lock.json'))) {
    installed = true;
    return;
  }
  try {
    execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: peerDir, stdio: 'pipe' });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`npm ci in ${peerDir} failed:\n${stdout ?? ''}${stderr ?? ''}`);
  }
  installed = true;
}

/**
 * A private redis-server on PEER_REDIS_PORT with its data in a fresh temp dir. Durability, as a
 * production Redis store for idempotency keys would be set: AOF on with `appendfsync everysec`
 * (Redis's recommended setting) and no RDB snapshots. Each write reaches the AOF file before Redis
 * replies, so a crash of Redis alone loses nothing; the file is fsynced once a second, so an OS
 * crash or power loss can lose about the last second. PostgreSQL here fsyncs every commit.
 * No maxmemory: keys are never evicted, only expired by their TTL.
 */
async function startRedis(): Promise<Child & { url: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-peer-redis-'));
  const args = [
    '--port',
    String(PEER_REDIS_PORT),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    '--save',
    '',
    '--daemonize',
    'no',
    '--logfile',
    '',
    '--loglevel',
    'notice',
  ];
  try {
    const redis = await startChild('redis-server', 'redis-server', args, { cwd: dir, env: process.env }, (output) =>
      output.includes('Ready to accept connections'),
    );
    const stop = redis.stop;
    return {
      ...redis,
      url: `redis://127.0.0.1:${PEER_REDIS_PORT}`,
      stop: async () => {
        await stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

interface Child {
  process: ChildProcess;
  stop(): Promise<void>;
}

/** Spawns a process and resolves once `ready(output)` holds; rejects with its output if it exits or takes over `timeoutMs`. */
async function startChild(
  name: string,
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
  ready: (output: string) => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<Child> {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  let gone = false;
  const exited = new Promise<void>((resolve) => {
    child.once('error', (error) => ((output += String(error)), (gone = true), resolve()));
    child.once('exit', () => ((gone = true), resolve()));
  });
  const killOnExit = () => child.kill('SIGKILL'); // never leave a Redis on the port behind a crashed bench
  process.once('exit', killOnExit);
  const stop = async () => {
    if (!gone) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    process.removeListener('exit', killOnExit);
  };
  const deadline = Date.now() + timeoutMs;
  while (!(await ready(output))) {
    if (gone || Date.now() > deadline) {
      await stop();
      throw new Error(`${name} ${gone ? 'exited before it was ready' : `not ready within ${timeoutMs / 1000} s`}:\n${output.slice(-2000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { process: child, stop };
}

/** Whether anything answers HTTP at `url` (a 404 for GET / counts: the app is listening). */
async function answers(url: string): Promise<boolean> {
  try {
    await (await fetch(url)).arrayBuffer();
    return true;
  } catch {
    return false;
  }
}
