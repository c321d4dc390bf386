import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * Ports for the servers tests, the demo and the bench start: a port is chosen here and taken only when
 * the app listens, a moment later. The OS's own pick (listen on 0) comes from the ephemeral range, which
 * every outgoing connection of that moment also draws from, so an app could lose its port to a Kafka or
 * pg client and die with EADDRINUSE. These ports therefore come from below that range, where only
 * listeners go: each jest worker walks its own slice (processes outside jest share slice 0), starting at
 * a random place so two runs on one machine rarely meet, and skips any port something already listens on.
 */
const RANGE = { low: 20_000, high: 29_000 }; // below the test brokers (29092...) and the usual ephemeral range
const SLICES = 9; // slice 0 and up to eight jest workers

const slice = sliceOf(Number(process.env.JEST_WORKER_ID ?? 0));
let next = slice ? slice.low + Math.floor(Math.random() * (slice.high - slice.low)) : 0;

/** A TCP port free on 127.0.0.1 right now, outside the ephemeral range. No side effects. */
export async function freePort(): Promise<number> {
  if (!slice) return osPick();
  for (let tried = 0; tried < slice.high - slice.low; tried++) {
    const port = next;
    next = next + 1 < slice.high ? next + 1 : slice.low;
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port in ${slice.low}-${slice.high - 1}`);
}

/** This process's share of RANGE without the kernel's ephemeral ports, or undefined when none is left (then the OS picks). */
function sliceOf(worker: number): { low: number; high: number } | undefined {
  const [ephemeralLow, ephemeralHigh] = ephemeralRange();
  const below = { low: RANGE.low, high: Math.min(RANGE.high, ephemeralLow) };
  const above = { low: Math.max(RANGE.low, ephemeralHigh + 1), high: RANGE.high };
  const usable = below.high - below.low >= above.high - above.low ? below : above;
  const size = Math.floor((usable.high - usable.low) / SLICES);
  if (size < 16) return undefined;
  const index = Number.isInteger(worker) && worker >= 0 ? worker % SLICES : 0;
  return { low: usable.low + index * size, high: usable.low + (index + 1) * size };
}

function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high)) return [low, high];
  } catch {
    // not Linux: assume the IANA dynamic range
  }
  return [49_152, 65_535];
}

async function canListen(port: number): Promise<boolean> {
  const server = createServer();
  const listening = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (listening) await new Promise((resolve) => server.close(resolve));
  return listening;
}

async function osPick(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
