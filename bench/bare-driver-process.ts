/**
 * The bare-driver baseline (bare-driver.ts) as a process of its own, for bench/instructions.bench.ts to
 * count its instructions as it counts the API's. Reads lines `<key prefix> <transactions> <concurrency>`
 * on stdin, runs them, answers `done` (or `failed <reason>`) on stdout; exits when stdin closes.
 * Environment: BENCH_ORDERS_DATABASE_URL, BENCH_API_KEY, BENCH_POOL_SIZE.
 */
import { createInterface } from 'node:readline';
import { BareDriverCreate } from './bare-driver';
import { closedLoop } from './load';

const bare = new BareDriverCreate(
  process.env.BENCH_ORDERS_DATABASE_URL!,
  Number(process.env.BENCH_POOL_SIZE ?? 10),
  process.env.BENCH_API_KEY!,
);

async function main(): Promise<void> {
  process.stdout.write('ready\n');
  for await (const line of createInterface({ input: process.stdin })) {
    const [prefix, transactions, concurrency] = line.split(' ');
    try {
      await closedLoop(Number(transactions), Number(concurrency), async (i) => [await bare.create(`${prefix}-${i}`)]);
      process.stdout.write('done\n');
    } catch (error) {
      process.stdout.write(`failed ${(error as Error).message.split('\n')[0]}\n`);
    }
  }
  await bare.close();
}

void main();
