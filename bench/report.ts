import { Measured } from './load';

export interface ScenarioResult extends Measured {
  name: string;
  measures: string;
  connections: number;
  unexpected: number;
  /** CPU the API process used per request during the scenario, in ms. */
  apiCpuMsPerRequest: number;
  /**
   * Where the rest of the machine's CPU went, per request in ms: every PostgreSQL process, and this
   * process (the load generator; for the bare-driver rows, the driver itself); and the fraction of the
   * machine's CPU time that was busy (any process). NaN where /proc cannot be read.
   */
  postgresCpuMsPerRequest?: number;
  benchCpuMsPerRequest?: number;
  machineBusy?: number;
  /** Throughput and p99 divided by the first scenario's (the bare-driver ceiling), measured in the same run. */
  perSecondVsBaseline: number;
  p99VsBaseline: number;
  /** Each measured round's own numbers, its ratio to that round's baseline included. */
  rounds: RoundResult[];
}

/** One scenario measured in one round. */
export type ScenarioRun = Omit<ScenarioResult, 'perSecondVsBaseline' | 'p99VsBaseline' | 'rounds'>;
export type RoundResult = Pick<
  ScenarioResult,
  | 'perSecond'
  | 'p50Ms'
  | 'p99Ms'
  | 'apiCpuMsPerRequest'
  | 'postgresCpuMsPerRequest'
  | 'benchCpuMsPerRequest'
  | 'machineBusy'
  | 'perSecondVsBaseline'
>;

export interface BenchReport {
  ok: boolean;
  machine: { cpus: number; cpuModel: string; memoryGiB: number; node: string; platform: string; loadAverage1m: number };
  settings: Record<string, string | number>;
  server: string;
  scenarios: ScenarioResult[];
  problems: string[];
}

/**
 * The scenarios over all rounds (each round lists every scenario; the first one is the baseline, the
 * bare-driver ceiling): throughput and API CPU are the rounds' means, p50 and p99 their medians, and
 * the ratio to the baseline is the mean of each round's ratio to its own baseline, so that the
 * machine's drift between rounds cancels instead of landing on whichever scenario ran in a slow moment.
 */
export function combineRounds(rounds: ScenarioRun[][]): ScenarioResult[] {
  const baselineName = rounds[0][0].name;
  const byRound = rounds.map((runs) => {
    const baseline = runs.find((run) => run.name === baselineName)!;
    return new Map(runs.map((run) => [run.name, { run, perSecondVsBaseline: run.perSecond / baseline.perSecond }]));
  });
  const results = rounds[0].map(({ name, measures, connections, unexpected }) => {
    const measured = byRound.map((runs) => runs.get(name)!);
    const runs = measured.map(({ run }) => run);
    return {
      name,
      measures,
      connections,
      unexpected,
      requests: sum(runs.map((run) => run.requests)),
      units: sum(runs.map((run) => run.units)),
      seconds: sum(runs.map((run) => run.seconds)),
      perSecond: mean(runs.map((run) => run.perSecond)),
      unitsPerSecond: mean(runs.map((run) => run.unitsPerSecond)),
      p50Ms: median(runs.map((run) => run.p50Ms)),
      p99Ms: median(runs.map((run) => run.p99Ms)),
      apiCpuMsPerRequest: mean(runs.map((run) => run.apiCpuMsPerRequest)),
      postgresCpuMsPerRequest: meanOf(runs.map((run) => run.postgresCpuMsPerRequest)),
      benchCpuMsPerRequest: meanOf(runs.map((run) => run.benchCpuMsPerRequest)),
      machineBusy: meanOf(runs.map((run) => run.machineBusy)),
      perSecondVsBaseline: mean(measured.map((m) => m.perSecondVsBaseline)),
      rounds: measured.map(({ run, perSecondVsBaseline }) => ({
        perSecond: run.perSecond,
        p50Ms: run.p50Ms,
        p99Ms: run.p99Ms,
        apiCpuMsPerRequest: run.apiCpuMsPerRequest,
        postgresCpuMsPerRequest: run.postgresCpuMsPerRequest,
        benchCpuMsPerRequest: run.benchCpuMsPerRequest,
        machineBusy: run.machineBusy,
        perSecondVsBaseline,
      })),
    };
  });
  return results.map((result) => ({ ...result, p99VsBaseline: result.p99Ms / results[0].p99Ms }));
}

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
const mean = (values: number[]) => sum(values) / values.length;
/** The mean of the values every round has; undefined when a round lacks it. */
const meanOf = (values: (number | undefined)[]) => (values.every((value) => value !== undefined) ? mean(values as number[]) : undefined);
/** A CPU reading for a table: two decimals, '-' for none, 'n/a' where /proc could not be read. */
export const cpuCell = (ms: number | undefined) => (ms === undefined ? '-' : Number.isNaN(ms) ? 'n/a' : ms.toFixed(2));
export const busyCell = (busy: number | undefined) =>
  busy === undefined ? '-' : Number.isNaN(busy) ? 'n/a' : `${(busy * 100).toFixed(0)} %`;
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

export function printTable(report: BenchReport): string {
  const { machine, settings } = report;
  const lines = [
    `machine:  ${machine.cpus} CPUs (${machine.cpuModel}), ${machine.memoryGiB} GiB, Node ${machine.node}, ${machine.platform}, ` +
      `load average ${machine.loadAverage1m.toFixed(2)} at start; API, PostgreSQL and this load generator share it`,
    `server:   ${report.server}`,
    `settings: ${Object.entries(settings)
      .map(([name, value]) => `${name}=${value}`)
      .join(', ')}`,
    '',
  ];
  const header = [
    'scenario',
    'requests',
    'conns',
    'req/s',
    'p50 ms',
    'p99 ms',
    'req/s vs bare',
    'p99 vs bare',
    'API CPU ms/req',
    'PG CPU ms/req',
    'bench CPU ms/req',
    'CPUs busy',
    'unexpected',
  ];
  const rows = report.scenarios.map((s) => [
    s.name,
    String(s.requests),
    String(s.connections),
    s.perSecond.toFixed(0),
    s.p50Ms.toFixed(1),
    s.p99Ms.toFixed(1),
    `${s.perSecondVsBaseline.toFixed(2)}x`,
    `${s.p99VsBaseline.toFixed(2)}x`,
    Number.isFinite(s.apiCpuMsPerRequest) && s.apiCpuMsPerRequest > 0 ? s.apiCpuMsPerRequest.toFixed(2) : '-',
    cpuCell(s.postgresCpuMsPerRequest),
    cpuCell(s.benchCpuMsPerRequest),
    busyCell(s.machineBusy),
    String(s.unexpected),
  ]);
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i].length)));
  const format = (cells: string[]) => cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ');
  lines.push(format(header), ...rows.map(format), '');
  lines.push(...report.scenarios.map((s) => `${s.name.padEnd(widths[0])}  ${s.measures}`), '');
  lines.push(
    'PG CPU: every PostgreSQL process; bench CPU: this process, the load generator (for the bare-driver rows, the driver ' +
      "itself); CPUs busy: the machine's CPUs, any process, during the scenario.",
    '',
  );
  lines.push(report.ok ? 'OK: every reply was what the contract says' : `FAILED:\n${report.problems.map((p) => `  ${p}`).join('\n')}`);
  return lines.join('\n');
}
