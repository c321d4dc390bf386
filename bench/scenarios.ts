import { Call, KeepAliveClient, Reply } from './load';

export const RACE_BURST = 8;

/** What one scenario sends: `units` of work, each one request or one burst, by `workers` in parallel. */
export interface Scenario {
  name: string;
  measures: string;
  workers: number;
  /** Keep-alive connections: enough for every request a worker has in flight. */
  connections: number;
  /** Orders each unit of work must create: 1 per fresh key, 0 for reads and replays. */
  ordersPerUnit: number;
  /** Requests -> units of work (a racing unit is a burst of RACE_BURST requests). */
  units(requests: number): number;
  unit(client: KeepAliveClient, phase: 'warmup' | 'measured', index: number): Promise<Reply[]>;
}

/** Counts replies that are not what the API's contract says, with a few examples to print. */
export class Expectations {
  readonly unexpected = new Map<string, number>();
  readonly examples: string[] = [];

  expect(scenario: string, ok: boolean, what: () => string): void {
    if (ok) return;
    this.unexpected.set(scenario, (this.unexpected.get(scenario) ?? 0) + 1);
    if (this.examples.length < 10) this.examples.push(`${scenario}: ${what()}`);
  }

  get total(): number {
    return [...this.unexpected.values()].reduce((sum, n) => sum + n, 0);
  }
}

const describeReply = (reply: Reply) =>
  `${reply.status} replayed=${reply.headers['idempotent-replayed'] ?? '-'} ${reply.body.slice(0, 160)}`;

/**
 * The four scenarios, in the order they run. POSTs of the first-execution scenario remember their
 * Location so that the replay scenario can check it gets the same one back. Unexpected replies are
 * counted in warm-up too.
 */
export function commandPathScenarios(
  apiKey: string,
  orderId: string,
  concurrency: number,
  check: Expectations,
): Scenario[] {
  const auth = { Authorization: `Bearer ${apiKey}` };
  const body = JSON.stringify({ sku: 'BENCH-1', quantity: 1 });
  const create = (key: string): Call => ({
    method: 'POST',
    path: '/v1/orders',
    headers: { ...auth, 'Content-Type': 'application/json', 'Idempotency-Key': key },
    body,
  });
  const created = new Map<string, string>();
  const createdKeys: string[] = [];
  const bursts = Math.ceil(concurrency / RACE_BURST);
  const one = (requests: number) => requests;

  return [
    {
      name: 'baseline',
      measures: 'GET /v1/orders/{id}: authentication + one indexed read, no idempotency machinery',
      workers: concurrency,
      connections: concurrency,
      ordersPerUnit: 0,
      units: one,
      unit: async (client) => {
        const reply = await client.send({ method: 'GET', path: `/v1/orders/${orderId}`, headers: auth });
        check.expect('baseline', reply.status === 200, () => describeReply(reply));
        return [reply];
      },
    },
    {
      name: 'first execution',
      measures: 'POST /v1/orders, fresh key: claim + order + outbox row + receipt, one transaction',
      workers: concurrency,
      connections: concurrency,
      ordersPerUnit: 1,
      units: one,
      unit: async (client, phase, index) => {
        const key = `${phase}-first-${index}`;
        const reply = await client.send(create(key));
        const ok =
          reply.status === 201 && reply.headers['idempotent-replayed'] === undefined && !!reply.headers.location;
        check.expect('first execution', ok, () => describeReply(reply));
        if (ok) {
          created.set(key, String(reply.headers.location));
          createdKeys.push(key);
        }
        return [reply];
      },
    },
    {
      name: 'replay',
      measures: 'POST /v1/orders, key already used: the stored response, no new effect',
      workers: concurrency,
      connections: concurrency,
      ordersPerUnit: 0,
      units: one,
      unit: async (client, _phase, index) => {
        const key = createdKeys[index % createdKeys.length] ?? 'no-first-execution-succeeded';
        const reply = await client.send(create(key));
        const ok =
          reply.status === 201 &&
          reply.headers['idempotent-replayed'] === 'true' &&
          reply.headers.location === created.get(key);
        check.expect('replay', ok, () => describeReply(reply));
        return [reply];
      },
    },
    {
      name: 'racing duplicates',
      measures: `POST /v1/orders, bursts of ${RACE_BURST} identical requests per fresh key: 1 created, ${RACE_BURST - 1} wait and replay`,
      workers: bursts,
      connections: bursts * RACE_BURST,
      ordersPerUnit: 1,
      units: (requests) => Math.ceil(requests / RACE_BURST),
      unit: async (client, phase, index) => {
        const call = create(`${phase}-race-${index}`);
        const replies = await Promise.all(Array.from({ length: RACE_BURST }, () => client.send(call)));
        const fresh = replies.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
        const replayed = replies.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === 'true');
        const locations = new Set(replies.map((r) => r.headers.location));
        const ok = fresh.length === 1 && replayed.length === RACE_BURST - 1 && locations.size === 1;
        for (const reply of replies) {
          check.expect(
            'racing duplicates',
            ok,
            () => `key ${call.headers['Idempotency-Key']}: ${describeReply(reply)}`,
          );
        }
        return replies;
      },
    },
  ];
}
