/**
 * What every benchmark hands to docs/benchmarks.md: one section with its method, a table, the bars of
 * its chart (each a ratio to the baseline measured in the same run) and its targets, met or not.
 * `npm run bench` runs the benchmarks in turn and writes the document from their sections
 * (bench/document.ts); `npm run bench -- <name> --json` prints one benchmark's full report instead.
 */
export interface BenchSection {
  /** The benchmark's name on the command line (`npm run bench -- <id>`), also the chart's file name. */
  id: string;
  title: string;
  ok: boolean;
  /** What was measured and how, in a few sentences of Markdown. */
  method: string;
  /** The settings the numbers depend on (sizes, concurrency, pool sizes, batch sizes). */
  settings: Record<string, string | number>;
  table: { columns: string[]; rows: (string | number)[][] };
  /** The chart: throughput (or 1/latency) of each row as a ratio to the baseline, which is drawn at 1.0. */
  bars: { label: string; ratio: number; value: string }[];
  targets: { target: string; measured: string; met: boolean }[];
  /** Anything unexpected: lost or duplicated messages, unexpected replies, processes that died. */
  problems: string[];
}

/**
 * What a benchmark module (`bench/<id>.bench.ts`) exports as `run(argv)`: its section for the document,
 * its full report (printed by `--json`) and a plain-text table for the terminal.
 */
export interface BenchResult {
  section: BenchSection;
  report: object;
  text: string;
}

/** Thrown by `run(argv)` for a command line it cannot use: the runner prints the message and exits 2. */
export class UsageError extends Error {}
