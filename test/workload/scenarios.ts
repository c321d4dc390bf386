import { check, CheckResult } from './checker';
import { mulberry32, runWorkload } from './driver';
import { eventually } from '../support/eventually';
import { History } from './history';
import { Supervised, WorkloadStack } from './stack';

export interface ScenarioSize {
  commands: number;
  faults: number;
  /** How long the broker stays down in the Kafka outage scenario. */
  outageMs: number;
  drainTimeoutMs: number;
  /** The driver's pace: commands keep flowing at this rate while faults remain to be injected. */
  ratePerSecond: number;
}

export interface Scenario {
  name: string;
  /** What the fault is, for the report. */
  fault: string;
  /**
   * Injects one fault and returns once the system is back to its normal shape (killed apps started
   * again); `random` is the scenario's seeded generator.
   */
  inject(stack: WorkloadStack, random: () => number, size: ScenarioSize): Promise<void>;
  /** Faults are spaced this much apart (plus a random part of it). */
  gapMs: number;
  /** The scenario acts on the whole PostgreSQL server: it runs only on a stack with a server of its own. */
  needsOwnPostgres?: boolean;
  /** Its faults are aimed at requests in flight: the run must show requests cut off without an answer. */
  cutsOffRequests?: boolean;
}

export interface ScenarioResult {
  name: string;
  fault: string;
  seed: number;
  commands: number;
  faultsInjected: number;
  /** App exits no fault asked for (the supervisor restarted them), with the app's last output. */
  unplannedExits: { app: string; exit: string; output: string }[];
  drainMs: number;
  drained: boolean;
  durationMs: number;
  check: CheckResult;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const pick = <T>(random: () => number, items: T[]): T => items[Math.floor(random() * items.length)];

async function restart(app: Supervised, extra: Record<string, string> = {}): Promise<void> {
  await app.kill('SIGKILL');
  await app.start(extra);
}

export const scenarios: Scenario[] = [
  {
    name: 'relay killed mid-batch',
    fault: 'SIGKILL of one of two outbox relays while it publishes, then a restart',
    gapMs: 1_500,
    inject: async (stack, random) => restart(pick(random, stack.relays)),
  },
  {
    name: 'consumer killed between its database commit and its offset commit',
    fault:
      'fulfillment restarted with CRASH_AFTER_DATABASE_COMMIT (it SIGKILLs itself right after a batch commits), then started normally; ' +
      'the notifier SIGKILLed at a random moment and restarted',
    gapMs: 1_000,
    inject: async (stack, random) => {
      await stack.fulfillment.kill('SIGTERM');
      const notifierKill = (async () => {
        await sleep(random() * 3_000);
        await restart(stack.notifier);
      })();
      try {
        const crashing = await stack.fulfillment.start({ CRASH_AFTER_DATABASE_COMMIT: 'true' }, { exitExpected: true });
        const exit = await new Promise<string>((resolve) => {
          if (crashing.process.exitCode !== null || crashing.process.signalCode !== null)
            resolve(`${crashing.process.exitCode ?? crashing.process.signalCode}`);
          else crashing.process.once('exit', (code, signal) => resolve(`${code ?? signal}`));
        });
        if (exit !== 'SIGKILL')
          throw new Error(`the crashing fulfillment ended with ${exit}, not its own SIGKILL:\n${crashing.output().slice(-3000)}`);
      } catch (error) {
        // With a backlog waiting, its first commit (and its SIGKILL) can come before its HTTP port answers.
        if (!/exited before it was live/.test(String(error))) throw error;
      }
      await Promise.all([stack.fulfillment.start(), notifierKill]);
    },
  },
  {
    name: 'command-api killed mid-request',
    fault:
      'SIGKILL of one of the two command-api processes, picked at random, once it has a request in flight (those get no answer ' +
      'and are resolved on the other), then a restart',
    gapMs: 1_500,
    cutsOffRequests: true,
    inject: async (stack, random) => {
      // Aimed at requests in flight: a kill that cut none off (each had its answer written) is tried again, up to 5 times.
      for (let attempt = 0; attempt < 5; attempt++) {
        const victim = pick(random, stack.apis);
        await stack.whenBusy(victim, 3_000);
        const before = stack.requestsCutOff(victim);
        await victim.kill('SIGKILL');
        // Its process is gone: what was in flight ends without an answer within moments (a reset or closed socket).
        await eventually(
          () => stack.requestsInFlight(victim),
          (inFlight) => inFlight === 0,
          { timeoutMs: 1_000, intervalMs: 10 },
        ).catch(() => undefined);
        const cutOff = stack.requestsCutOff(victim) > before;
        await victim.start();
        if (cutOff) return;
      }
    },
  },
  {
    name: 'command-api frozen mid-request',
    fault:
      'SIGSTOP of one of the two command-api processes, picked at random, once it has a request in flight, for 1-6 s (a ' +
      'stop-the-world pause: its sessions keep their locks, requests sent to it wait, retries of its keys reach the other ' +
      'and wait for those locks), then SIGCONT',
    gapMs: 1_500,
    inject: async (stack, random) => {
      const victim = pick(random, stack.apis);
      await stack.whenBusy(victim, 3_000);
      const process = victim.app!.process;
      process.kill('SIGSTOP');
      try {
        await sleep(1_000 + random() * 5_000);
      } finally {
        process.kill('SIGCONT');
      }
    },
  },
  {
    name: 'Kafka stopped under load',
    fault: 'the broker stopped while commands keep arriving, started again with its data',
    gapMs: 2_000,
    inject: async (stack, _random, size) => {
      await stack.broker.stop();
      await sleep(size.outageMs);
      await stack.broker.start({ keepData: true });
    },
  },
  {
    name: 'PostgreSQL sessions terminated',
    fault: "pg_terminate_backend of every app's sessions (command-api, relays, fulfillment, notifier) mid-transaction",
    gapMs: 1_000,
    inject: async (stack) => {
      await stack.terminateBackends();
    },
  },
  {
    name: 'PostgreSQL restarted',
    fault:
      "the stack's own PostgreSQL server restarted under load: at random an orderly restart (pg_ctl stop -m fast) " +
      'or a crash (-m immediate: no checkpoint, the start replays the WAL)',
    gapMs: 3_000,
    needsOwnPostgres: true,
    inject: async (stack, random) => stack.postgres!.restart(random() < 0.5 ? 'fast' : 'immediate'),
  },
  {
    name: 'relays rebalancing while one is killed',
    fault: 'a third relay starts (shards move), one of the three is SIGKILLed while they rebalance; two remain',
    gapMs: 1_500,
    inject: async (stack, random) => {
      const joining = new Supervised('outbox-relay', stack.relays[0].env);
      stack.relays.push(joining);
      await joining.start();
      await sleep(random() * 1_500);
      const victim = pick(random, stack.relays);
      await victim.kill('SIGKILL');
      await victim.close();
      stack.relays.splice(stack.relays.indexOf(victim), 1);
    },
  },
];

/** The scenarios `stack` can run, and for each one it cannot, why (printed and written into the report). */
export function runnableScenarios(stack: WorkloadStack): { runnable: Scenario[]; skipped: string[] } {
  const noServer = stack.postgres ? stack.postgres.unavailable() : 'the stack uses the shared PostgreSQL server';
  const runnable = scenarios.filter((scenario) => !scenario.needsOwnPostgres || !noServer);
  const skipped = scenarios
    .filter((scenario) => !runnable.includes(scenario))
    .map((scenario) => `"${scenario.name}" is not run: it needs a PostgreSQL server of its own, and ${noServer}.`);
  return { runnable, skipped };
}

/**
 * One scenario: a fresh tenant, the workload at concurrency 32, `size.faults` faults at random moments
 * while it runs, then (faults over, apps back) the pipeline drains and the checker counts.
 */
export async function runScenario(stack: WorkloadStack, scenario: Scenario, size: ScenarioSize, seed: number): Promise<ScenarioResult> {
  const started = Date.now();
  const random = mulberry32(seed);
  const { tenantId, apiKey } = await stack.orders.tenant();
  const exitsBefore = new Map(stack.supervised().map((s) => [s, s.unplannedExits.length]));
  let faultsOver = false;
  let history: History | undefined;
  let faultsInjected = 0;
  const workload = runWorkload({
    apiUrl: () => stack.apiUrl,
    apiKey,
    tenantId,
    commands: size.commands,
    seed,
    concurrency: 32,
    ratePerSecond: size.ratePerSecond,
    keepGoing: () => !faultsOver,
    inFlight: (apiUrl, change, cutOff) => stack.trackRequest(apiUrl, change, cutOff),
  }).then((h) => (history = h));

  // The first fault comes early enough to meet load; the rest at random gaps while commands still flow.
  // Commands keep flowing until the last fault is in.
  await sleep(300 + random() * scenario.gapMs);
  try {
    while (faultsInjected < size.faults) {
      await scenario.inject(stack, random, size);
      faultsInjected++;
      if (faultsInjected < size.faults) await sleep(scenario.gapMs / 2 + random() * scenario.gapMs);
    }
  } finally {
    faultsOver = true;
    await workload;
    await stack.ensureRunning(); // a fault that failed half-way must not leave the next scenario without an app
  }

  const drainStarted = Date.now();
  let drained = false;
  while (!(drained = await stack.drained(tenantId).catch(() => false)) && Date.now() - drainStarted < size.drainTimeoutMs) {
    await sleep(250);
  }
  const drainMs = Date.now() - drainStarted;
  const snapshot = await stack.snapshot(tenantId);
  const kafka = await stack.readTopic(
    tenantId,
    snapshot.outbox.map((row) => row.id),
    drained ? 60_000 : 5_000,
  );
  const unplannedExits = stack
    .supervised()
    .flatMap((s) => s.unplannedExits.slice(exitsBefore.get(s) ?? 0).map((exit) => ({ app: s.name, exit: exit.exit, output: exit.output })));
  return {
    name: scenario.name,
    fault: scenario.fault,
    seed,
    commands: size.commands,
    faultsInjected,
    unplannedExits,
    drainMs,
    drained,
    durationMs: Date.now() - started,
    check: check(history!, snapshot, kafka),
  };
}
