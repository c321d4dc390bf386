import type { ChildProcess } from 'node:child_process';
import WatchedEnvironment from './watched-environment';

/** Where test/support/apps.ts registers the app processes a test file starts (on the file's own global). */
export const APP_PROCESSES = Symbol.for('e2e.appProcesses');

export interface AppProcesses {
  running: Set<ChildProcess>;
  /** Set when the file ends: an app started after that (by a test that timed out and ran on) is killed at once. */
  closed: boolean;
}

/**
 * The watched environment (what a file leaves running is named), plus one duty: when a test file ends,
 * every app process it started that is still running is killed. A test that times out keeps running
 * after jest moved on; without this, the apps it starts late outlive the file, and a stray relay then
 * claims and publishes other files' outbox rows (seen: one timed-out test turned into three failures)
 * and keeps the jest worker from exiting.
 */
export default class E2eEnvironment extends WatchedEnvironment {
  override async teardown(): Promise<void> {
    const apps = (this.global as Record<symbol, AppProcesses | undefined>)[APP_PROCESSES];
    if (apps) {
      apps.closed = true;
      await Promise.all([...apps.running].map(killed));
    }
    await super.teardown();
  }
}

function killed(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}
