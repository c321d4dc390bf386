import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import NodeEnvironment from 'jest-environment-node';
import { Leftovers } from './leftovers';

/** Where test/support/apps.ts registers the app processes a test file starts (on the file's own global). */
export const APP_PROCESSES = Symbol.for('e2e.appProcesses');

export interface AppProcesses {
  running: Set<ChildProcess>;
  /** Set when the file ends: an app started after that (by a test that timed out and ran on) is killed at once. */
  closed: boolean;
}

/** As long as jest waits for a worker to exit at the end of a run before it kills it. */
const WORKER_EXIT_GRACE_MS = 500;

/**
 * Node's environment, plus two duties when a test file ends:
 * - every app process it started that is still running is killed. A test that times out keeps running
 *   after jest moved on; without this, the apps it starts late outlive the file, and a stray relay then
 *   claims and publishes other files' outbox rows (seen: one timed-out test turned into three failures)
 *   and keeps the jest worker from exiting.
 * - what it left running past jest's grace for a worker's exit (leftovers.ts: timers, sockets,
 *   servers) is named on stderr with the file, so that jest's "a worker process has failed to exit
 *   gracefully", which names nothing, can be traced to its file.
 */
export default class E2eEnvironment extends NodeEnvironment {
  private readonly leftovers: Leftovers;
  private readonly testPath: string;

  constructor(...[config, context]: ConstructorParameters<typeof NodeEnvironment>) {
    super(config, context);
    this.testPath = context.testPath;
    this.leftovers = new Leftovers(this.global);
  }

  override async teardown(): Promise<void> {
    const apps = (this.global as Record<symbol, AppProcesses | undefined>)[APP_PROCESSES];
    if (apps) {
      apps.closed = true;
      await Promise.all([...apps.running].map(killed));
    }
    await super.teardown();
    await this.reportLeftovers();
  }

  private async reportLeftovers(): Promise<void> {
    const deadline = Date.now() + WORKER_EXIT_GRACE_MS;
    let left = this.leftovers.list();
    while (left.length && Date.now() < deadline) {
      await sleep(50);
      left = this.leftovers.list();
    }
    if (!left.length) return;
    const file = path.relative(process.cwd(), this.testPath);
    process.stderr.write(
      `\n${file} left running, ${WORKER_EXIT_GRACE_MS} ms after it ended (its jest worker cannot exit meanwhile):\n` +
        left.map((what) => `  - ${what}\n`).join(''),
    );
  }
}

function killed(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}
