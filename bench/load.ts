import { Agent, IncomingHttpHeaders, request } from 'node:http';

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** From writing the request to the last byte of the reply, in milliseconds. */
  ms: number;
}

export interface Call {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

/** A pool of `connections` keep-alive connections to one base URL. Network errors come back as status 0. */
export class KeepAliveClient {
  private readonly agent: Agent;

  constructor(
    private readonly baseUrl: string,
    readonly connections: number,
  ) {
    this.agent = new Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections });
  }

  /**
   * One request. A keep-alive connection the server closed as it was reused (its idle timeout, between
   * phases) fails before the server read anything; that request is sent again, as Node's documentation
   * advises (`request.reusedSocket`). Again while the connection it gets is another reused one that
   * fails so: after a stall several idle connections are taken at once, and more than one can have
   * passed the server's timeout (a run at 200/s lost 3 of 12,000 POSTs to a single retry). Each failed
   * connection leaves the pool, so this ends. Were a first try read after all, the bench's POSTs carry
   * an Idempotency-Key: the retry is answered as a replay. The reply's `ms` counts from the first try.
   */
  send(call: Call): Promise<Reply> {
    const started = process.hrtime.bigint();
    const elapsed = () => Number(process.hrtime.bigint() - started) / 1e6;
    const attempt = (retries: number): Promise<Reply> =>
      new Promise((resolve) => {
        const req = request(`${this.baseUrl}${call.path}`, { method: call.method, agent: this.agent, headers: call.headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks).toString(),
              ms: elapsed(),
            }),
          );
          res.on('error', (error) => resolve({ status: 0, headers: {}, body: String(error), ms: elapsed() }));
        });
        req.on('error', (error: NodeJS.ErrnoException) => {
          if (retries > 0 && req.reusedSocket && error.code === 'ECONNRESET') resolve(attempt(retries - 1));
          else resolve({ status: 0, headers: {}, body: String(error), ms: elapsed() });
        });
        req.end(call.body);
      });
    return attempt(this.connections);
  }

  close(): void {
    this.agent.destroy();
  }
}

export interface Measured {
  requests: number;
  /** Units of work done (a unit may send several requests: a racing burst, a refused request's retry). */
  units: number;
  seconds: number;
  perSecond: number;
  unitsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/**
 * Runs `units` units of work on `workers` workers, each worker starting its next unit when the last
 * one ended (a closed loop: the offered load is the concurrency, not a rate). A unit sends one or
 * more requests and returns their replies; every latency is kept.
 */
export async function closedLoop(units: number, workers: number, unit: (index: number) => Promise<Reply[]>): Promise<Measured> {
  const latencies: number[] = [];
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: Math.min(workers, units) }, async () => {
      while (next < units) {
        for (const reply of await unit(next++)) latencies.push(reply.ms);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    units,
    seconds,
    perSecond: latencies.length / seconds,
    unitsPerSecond: units / seconds,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
  };
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
