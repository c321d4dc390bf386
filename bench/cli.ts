import { cpus, loadavg, totalmem } from 'node:os';
import { BenchResult, UsageError } from './section';

/**
 * The command line of one benchmark module run on its own (`npm run bench -- <id> [flags]`): `--help`
 * prints its usage; a bad command line exits 2 with a one-line reason; otherwise the table, or with
 * `--json` the full report, and exit 0 when everything held, 1 when anything was lost or unexpected.
 */
export function runAsMain(benchmark: { usage: string; run(argv: string[]): Promise<BenchResult> }): void {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${benchmark.usage}\n`);
    return;
  }
  benchmark.run(argv).then(
    (result) => {
      process.stdout.write(`${argv.includes('--json') ? JSON.stringify(result.report) : result.text}\n`);
      process.exitCode = result.section.ok ? 0 : 1;
    },
    (error: Error) => {
      if (error instanceof UsageError) {
        process.stderr.write(`bench: ${error.message}\n${benchmark.usage}\n`);
        process.exitCode = 2;
      } else {
        process.stderr.write(`bench: ${error.stack ?? error.message}\n`);
        process.exitCode = 1;
      }
    },
  );
}

/** The machine the numbers come from, for every report. */
export type Machine = ReturnType<typeof describeMachine>;

export function describeMachine() {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    loadAverage1m: loadavg()[0],
  };
}
