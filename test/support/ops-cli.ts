import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { entryArgs } from './apps';
import { testEnv } from './test-env';

const root = join(__dirname, '..', '..');

export interface OpsRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real ops CLI from source, as an operator would (`npm run ops -- <args>`), against the
 * test databases and broker (test-env.ts). Asynchronous (not spawnSync) so that independent runs
 * can overlap: each one boots Nest from the build global setup made (support/build.ts).
 */
export function ops(args: string[], env: Record<string, string> = {}): Promise<OpsRun> {
  return startOps(args, env).result;
}

/** The same run, with its process at hand (to interrupt it the way an operator's Ctrl-C would). */
export function startOps(args: string[], env: Record<string, string> = {}): { process: ChildProcess; result: Promise<OpsRun> } {
  let child!: ChildProcess;
  const result = new Promise<OpsRun>((resolve, reject) => {
    child = spawn(process.execPath, [...entryArgs('apps/ops/src/main.ts'), ...args], {
      cwd: root,
      env: {
        ...process.env,
        ORDERS_DATABASE_URL: testEnv.ordersUrl,
        FULFILLMENT_DATABASE_URL: testEnv.fulfillmentUrl,
        NOTIFIER_DATABASE_URL: testEnv.notifierUrl,
        KAFKA_BROKERS: testEnv.kafkaBrokers,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk) => (stdout += chunk));
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (status) => resolve({ status, stdout, stderr }));
  });
  return { process: child, result };
}

/** The one JSON line a `--json` command prints, or a failure that shows what it printed instead. */
export function json(run: OpsRun): any {
  if (run.status !== 0) throw new Error(`ops exited ${run.status}: ${run.stderr}`);
  const lines = run.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]);
}
