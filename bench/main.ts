/**
 * `npm run bench`: every benchmark in turn, then docs/benchmarks.md and its charts written from their
 * sections. `npm run bench -- <id> [flags]` runs one and prints its table (`--json`: its full report)
 * without touching the document. Never part of `npm test`.
 */
import './bench-env'; // first: it points test/support at the bench databases
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describeMachine, runAsMain } from './cli';
import * as commands from './command-path.bench';
import * as consumers from './consumers.bench';
import * as instructions from './instructions.bench';
import * as latency from './latency.bench';
import * as relay from './relay.bench';
import { describeServer } from './bench-database';
import { benchOrdersUrl } from './bench-env';
import { writeDocument } from './document';
import { BenchResult, BenchSection } from './section';
import * as webhooks from './webhooks.bench';

interface Benchmark {
  usage: string;
  run(argv: string[]): Promise<BenchResult>;
}

/**
 * In the order `npm run bench` runs them: B1 commands (with the peer), B2 relay (with the peer), B3
 * consumers, B4 latency, webhooks; `instructions` (B1 counted in instructions, ~10 min) only on its own.
 */
const BENCHMARKS: Record<string, Benchmark> = { commands, relay, consumers, latency, webhooks, instructions };
const ON_ITS_OWN = new Set(['instructions']);

/** The full report of each benchmark of the last `npm run bench` (git-ignored). */
const RESULTS_DIR = join(__dirname, '..', '.cache', 'bench');

const usage = `usage: npm run bench [-- <benchmark> [flags]]   benchmarks: ${Object.keys(BENCHMARKS).join(', ')}
  with no benchmark: all of them but ${[...ON_ITS_OWN].join(', ')} with their default sizes, then docs/benchmarks.md is written
  npm run bench -- <benchmark> --help   that benchmark's flags`;

async function runAll(): Promise<BenchResult> {
  const startedAt = new Date();
  const machine = describeMachine();
  const sections: BenchSection[] = [];
  for (const [id, benchmark] of Object.entries(BENCHMARKS)) {
    if (ON_ITS_OWN.has(id)) continue;
    process.stderr.write(`bench: === ${id} ===\n`);
    const result = await benchmark.run([]);
    process.stdout.write(`\n${result.text}\n`);
    sections.push(result.section);
    // Kept as it comes, so that a failure later in the run loses no measurement.
    mkdirSync(RESULTS_DIR, { recursive: true });
    writeFileSync(join(RESULTS_DIR, `${id}.json`), JSON.stringify(result.report));
  }
  const path = writeDocument(join(__dirname, '..', 'docs'), sections, {
    machine,
    versions: await versions(),
    command: 'npm run bench',
    startedAt,
    minutes: (Date.now() - startedAt.getTime()) / 60_000,
  });
  const failed = sections.filter((section) => !section.ok).map((section) => section.id);
  const text = `\nwrote ${path}${failed.length ? `\nFAILED: ${failed.join(', ')}` : ''}`;
  return { report: { sections }, text, section: { ...sections[0], ok: failed.length === 0 } };
}

async function versions(): Promise<Record<string, string>> {
  // The pinned versions (package.json pins exact ones): some packages do not export their package.json.
  const pinned = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  const version = (name: string) => pinned.dependencies[name] ?? 'unknown';
  const kafka = /^KAFKA_VERSION="([^"]+)"/m.exec(readFileSync(join(__dirname, '..', 'scripts', 'infra.sh'), 'utf8'))?.[1];
  return {
    PostgreSQL: (await describeServer(benchOrdersUrl)).replace(/^PostgreSQL /, ''),
    Kafka: kafka ?? 'unknown',
    Node: process.version,
    ...Object.fromEntries(['@nestjs/core', 'typeorm', 'pg', 'kafkajs'].map((name) => [name, version(name)])),
  };
}

const [id] = process.argv.slice(2);
if (id === undefined || id === 'all') {
  runAsMain({ usage, run: () => runAll() });
} else if (id === '--help' || id === '-h') {
  process.stdout.write(`${usage}\n`);
} else if (BENCHMARKS[id]) {
  process.argv.splice(2, 1);
  runAsMain(BENCHMARKS[id]);
} else {
  process.stderr.write(`bench: unknown benchmark "${id}"\n${usage}\n`);
  process.exitCode = 2;
}
