import { Presets, SingleBar } from 'cli-progress';

/** What long-running commands report to; a no-op unless a person is watching. */
export interface Progress {
  increment(by?: number): void;
  setTotal(total: number): void;
  stop(): void;
}

const silent: Progress = { increment: () => undefined, setTotal: () => undefined, stop: () => undefined };

/**
 * A progress bar on stderr when it is a terminal and the output is for people (not --json), so
 * stdout stays exactly what the command prints and pipes and CI logs stay clean.
 */
export function progress(label: string, total: number, { json }: { json?: boolean } = {}): Progress {
  if (json || !process.stderr.isTTY) return silent;
  const bar = new SingleBar(
    { format: `${label} [{bar}] {percentage}% | {value}/{total} | ETA {eta_formatted}`, stream: process.stderr, hideCursor: true },
    Presets.shades_classic,
  );
  bar.start(total, 0);
  return {
    increment: (by = 1) => bar.increment(by),
    setTotal: (n) => bar.setTotal(n),
    stop: () => bar.stop(),
  };
}
