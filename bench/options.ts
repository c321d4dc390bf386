import { parseArgs, ParseArgsConfig } from 'node:util';
import { UsageError } from './section';

export interface BenchOptions {
  requests: number;
  warmup: number;
  concurrency: number;
  /** Measured rounds; each runs every scenario, in the opposite order to the round before. */
  rounds: number;
  json: boolean;
  /** Profile the API (`node --cpu-prof`) during first executions only, and write a flame graph SVG here. */
  profile?: string;
}

export const usage =
  'usage: npm run bench -- commands [--requests N (8-1000000, default 4000)] [--concurrency N (1-256, default 16)] [--rounds N (1-10, default 3)] [--json] [--profile <out.svg>]';

/** The command line, or a one-line reason it is not usable. */
export function parseOptions(argv: string[]): BenchOptions | { help: true } | { error: string } {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        requests: { type: 'string' },
        concurrency: { type: 'string' },
        rounds: { type: 'string' },
        json: { type: 'boolean', default: false },
        profile: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (error) {
    return { error: (error as Error).message.split('\n')[0] };
  }
  if (values.help) return { help: true };
  const requests = integer('--requests', values.requests, 4000, 8, 1_000_000);
  if (typeof requests === 'string') return { error: requests };
  const concurrency = integer('--concurrency', values.concurrency, 16, 1, 256);
  if (typeof concurrency === 'string') return { error: concurrency };
  const rounds = integer('--rounds', values.rounds, 3, 1, 10);
  if (typeof rounds === 'string') return { error: rounds };
  if (values.profile !== undefined && !values.profile.endsWith('.svg'))
    return { error: `--profile must name an .svg file, got "${values.profile}"` };
  return { requests, warmup: Math.max(200, Math.ceil(requests / 5)), concurrency, rounds, json: values.json, profile: values.profile };
}

/** An integer flag within [min, max], its fallback when absent, or a one-line reason it is not usable. */
export function integer(flag: string, text: string | undefined, fallback: number, min: number, max: number): number | string {
  if (text === undefined) return fallback;
  const value = /^\d+$/.test(text) ? Number(text) : NaN;
  return Number.isSafeInteger(value) && value >= min && value <= max
    ? value
    : `${flag} must be an integer from ${min} to ${max}, got "${text}"`;
}

/**
 * The benchmarks' flags: `parseArgs` in strict mode with `--help`/`-h` and `--json` added, its
 * errors turned into one-line UsageErrors (the runner prints them and exits 2).
 */
export function benchArgs<T extends ParseArgsConfig['options']>(argv: string[], options: T) {
  try {
    return parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        ...options,
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      } as const,
    }).values;
  } catch (error) {
    throw new UsageError((error as Error).message.split('\n')[0]);
  }
}

/** An integer flag within [min, max], its fallback when absent; a UsageError otherwise. */
export function integerFlag(flag: string, text: string | undefined, fallback: number, min: number, max: number): number {
  const value = integer(flag, text, fallback, min, max);
  if (typeof value === 'string') throw new UsageError(value);
  return value;
}

/** A --profile flag: an .svg path, or undefined. */
export function svgFlag(flag: string, text: string | undefined): string | undefined {
  if (text !== undefined && !text.endsWith('.svg')) throw new UsageError(`${flag} must name an .svg file, got "${text}"`);
  return text;
}
