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
}

export interface BenchReport {
  ok: boolean;
  machine: { cpus: number; cpuModel: string; memoryGiB: number; node: string; platform: string; loadAverage1m: number };
  settings: Record<string, string | number>;
  server: string;
  scenarios: ScenarioResult[];
  problems: string[];
}

export function withRatios(results: Omit<ScenarioResult, 'perSecondVsBaseline' | 'p99VsBaseline'>[]): ScenarioResult[] {
  const [baseline] = results;
  return results.map((result) => ({
    ...result,
    perSecondVsBaseline: result.perSecond / baseline.perSecond,
    p99VsBaseline: result.p99Ms / baseline.p99Ms,
  }));
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
