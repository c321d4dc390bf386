import { Measured } from './load';

export interface ScenarioResult extends Measured {
  name: string;
  measures: string;
  connections: number;
  unexpected: number;
  /** CPU the API process used per request during the scenario, in ms. */
  apiCpuMsPerRequest: number;
  /** Throughput and p99 divided by the first scenario's (the bare-driver ceiling), measured in the same run. */
  perSecondVsBaseline: number;
  p99VsBaseline: number;
  /** Each measured round's own numbers, its ratio to that round's baseline included. */
  rounds: RoundResult[];
}

/** One scenario measured in one round. */
export type ScenarioRun = Omit<ScenarioResult, 'perSecondVsBaseline' | 'p99VsBaseline' | 'rounds'>;
export type RoundResult = Pick<ScenarioResult, 'perSecond' | 'p50Ms' | 'p99Ms' | 'apiCpuMsPerRequest' | 'perSecondVsBaseline'>;

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
      seconds: sum(runs.map((run) => run.seconds)),
      perSecond: mean(runs.map((run) => run.perSecond)),
      p50Ms: median(runs.map((run) => run.p50Ms)),
      p99Ms: median(runs.map((run) => run.p99Ms)),
      apiCpuMsPerRequest: mean(runs.map((run) => run.apiCpuMsPerRequest)),
      perSecondVsBaseline: mean(measured.map((m) => m.perSecondVsBaseline)),
      rounds: measured.map(({ run, perSecondVsBaseline }) => ({
        perSecond: run.perSecond,
        p50Ms: run.p50Ms,
        p99Ms: run.p99Ms,
        apiCpuMsPerRequest: run.apiCpuMsPerRequest,
        perSecondVsBaseline,
      })),
    };
  });
  return results.map((result) => ({ ...result, p99VsBaseline: result.p99Ms / results[0].p99Ms }));
}

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
const mean = (values: number[]) => sum(values) / values.length;
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
    String(s.unexpected),
  ]);
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i].length)));
  const format = (cells: string[]) => cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ');
  lines.push(format(header), ...rows.map(format), '');
  lines.push(...report.scenarios.map((s) => `${s.name.padEnd(widths[0])}  ${s.measures}`), '');
  lines.push(report.ok ? 'OK: every reply was what the contract says' : `FAILED:\n${report.problems.map((p) => `  ${p}`).join('\n')}`);
  return lines.join('\n');
}
