import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { builtEntryArgs } from './build';
import { APP_PROCESSES, AppProcesses } from './e2e-environment';
import { freePort } from './free-port';

const root = join(__dirname, '..', '..');

export type AppName = 'command-api' | 'outbox-relay' | 'fulfillment' | 'notifier' | 'webhook-receiver';

const portVariable: Record<AppName, string> = {
  'command-api': 'COMMAND_API_PORT',
  'outbox-relay': 'OUTBOX_RELAY_PORT',
  fulfillment: 'FULFILLMENT_PORT',
  notifier: 'NOTIFIER_PORT',
  'webhook-receiver': 'WEBHOOK_RECEIVER_PORT',
};

/** Apps that serve /metrics and /docs on a management port of their own (MANAGEMENT_PORT). */
const managed = new Set<AppName>(['command-api', 'outbox-relay', 'fulfillment', 'notifier', 'webhook-receiver']);

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface RunningApp {
  url: string;
  /** Where /metrics and /docs are: the management port, or `url` for an app without one. */
  managementUrl: string;
  process: ChildProcess;
  /** Everything the app wrote so far, for assertions and for failure messages. */
  output(): string;
  /** Sends `signal` and resolves with how the process ended once it is gone. */
  stop(signal?: NodeJS.Signals): Promise<Exit>;
}

export interface StartOptions {
  /** Arguments for node ahead of the entry point (`--cpu-prof`, …). */
  nodeArgs?: string[];
  /** A program that runs node (`valgrind --tool=callgrind …`): node's command line follows its own. */
  launcher?: string[];
}

/**
 * Sends `signal` (SIGTERM: an orchestrator's stop; SIGINT: Ctrl-C) and waits at most `withinMs` for the
 * process to end: how it ended ('still running' if it had not), and whether it logged that its shutdown
 * ran into SHUTDOWN_TIMEOUT_SECONDS.
 */
export async function stopWithin(
  app: RunningApp,
  withinMs: number,
  signal: 'SIGTERM' | 'SIGINT' = 'SIGTERM',
): Promise<{ outcome: Exit | 'still running'; deadline: boolean }> {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    app.stop(signal),
    new Promise<'still running'>((resolve) => (timer = setTimeout(() => resolve('still running'), withinMs))),
  ]);
  clearTimeout(timer);
  return { outcome, deadline: /shutdown did not finish/.test(app.output()) };
}

/** Runs an app's real entry point from source as its own process, on a free port, and waits until it is live. */
export async function startApp(app: AppName, env: Record<string, string> = {}, options: StartOptions = {}): Promise<RunningApp> {
  // A port is free when chosen and taken only when the app listens; should another process take it
  // meanwhile (see free-port.ts), the app exits with EADDRINUSE and is started again on other ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(app, env, options);
    } catch (error) {
      if (!(error instanceof PortTaken) || attempt === 3) throw error;
    }
  }
}

class PortTaken extends Error {}

/** This test file's app processes, which its environment kills when the file ends (e2e-environment.ts). */
function appProcesses(): AppProcesses {
  const scope = globalThis as Record<symbol, AppProcesses | undefined>;
  return (scope[APP_PROCESSES] ??= { running: new Set(), closed: false });
}

async function startOnce(app: AppName, env: Record<string, string>, { nodeArgs = [], launcher = [] }: StartOptions): Promise<RunningApp> {
  const port = await freePort();
  const managementPort = managed.has(app) ? await freePort() : port;
  const [command, ...args] = [...launcher, process.execPath, ...nodeArgs, ...entryArgs(`apps/${app}/src/main.ts`)];
  const child = spawn(command, args, {
    cwd: root,
    env: {
      ...process.env,
      LOG_LEVEL: 'info',
      ...env,
      [portVariable[app]]: String(port),
      ...(managed.has(app) ? { MANAGEMENT_PORT: String(managementPort) } : {}),
      HOST: '127.0.0.1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const apps = appProcesses();
  apps.running.add(child);
  child.once('exit', () => apps.running.delete(child));
  if (apps.closed) child.kill('SIGKILL'); // its test file has ended: waitUntilLive reports the exit
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const running: RunningApp = {
    url: `http://127.0.0.1:${port}`,
    managementUrl: `http://127.0.0.1:${managementPort}`,
    process: child,
    output: () => output,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  // Under a launcher such as valgrind, startup takes several times as long.
  await waitUntilLive(running, exited, launcher.length ? 180_000 : 30_000);
  return running;
}

/** Node arguments that run an entry point (`apps/<app>/src/main.ts`) from the build global setup made. */
export function entryArgs(entry: string): string[] {
  return builtEntryArgs(entry);
}

async function waitUntilLive(app: RunningApp, exited: Promise<Exit>, timeoutMs = 30_000) {
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (gone) {
      const message = `app exited before it was live:\n${app.output()}`;
      throw /EADDRINUSE/.test(app.output()) ? new PortTaken(message) : new Error(message);
    }
    try {
      if ((await fetch(`${app.url}/health/live`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await app.stop('SIGKILL');
  throw new Error(`app not live within ${timeoutMs} ms:\n${app.output()}`);
}
