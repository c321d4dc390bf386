import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import NodeEnvironment from 'jest-environment-node';
import { Leftovers } from './leftovers';

/** As long as jest waits for a worker to exit at the end of a run before it kills it. */
const WORKER_EXIT_GRACE_MS = 500;

/**
 * Node's environment, naming on stderr what a test file left running past jest's grace for a worker's
 * exit (leftovers.ts: timers, sockets, servers, child processes): jest's "a worker process has failed
 * to exit gracefully" names nothing, and only the file that ends last in a worker trips it. Every
 * test project runs in it (unit specs and end-to-end suites share the workers).
 */
export default class WatchedEnvironment extends NodeEnvironment {
  private readonly leftovers: Leftovers;
  private readonly testPath: string;

  constructor(...[config, context]: ConstructorParameters<typeof NodeEnvironment>) {
    super(config, context);
    this.testPath = context.testPath;
    this.leftovers = new Leftovers(this.global);
  }

  override async teardown(): Promise<void> {
    await super.teardown();
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
