import { Call, closedLoop, KeepAliveClient, Reply } from './load';

export const RACE_BURST = 8;

/**
 * In the mix, request i (i % 10 < 3, i >= RETRY_DISTANCE) retries the key of request
 * i - RETRY_DISTANCE + 5, whose i % 10 is 5 to 7: a fresh key, sent long enough ago to have committed,
 * as a client's retry after a lost reply.
 */
const RETRY_DISTANCE = 100;
const isRetry = (index: number) => index % 10 < 3;
/** How many of `units` mixed requests retry (the first RETRY_DISTANCE are all fresh). */
function retries(units: number): number {
  let count = 0;
  for (let i = RETRY_DISTANCE; i < units; i++) if (isRetry(i)) count++;
  return count;
}

/** What one scenario sends: `units` of work, each one request or one burst, by `workers` in parallel. */
export interface Scenario {
  name: string;
  measures: string;
  workers: number;
  /** Keep-alive connections: enough for every request a worker has in flight. */
  connections: number;
  /** Orders `units` units of work must create in our database: one per fresh key, none for reads and replays. */
  orders(units: number): number;
  /** Where the requests go and whose CPU is counted, when not our command-api (a peer). */
  target?: { url: string; pid: number };
  /** Requests -> units of work (a racing unit is a burst of RACE_BURST requests). */
  units(requests: number): number;
  /** One unit of work; `pass` names the warm-up or measured round it belongs to, so that fresh keys stay fresh. */
  unit(client: KeepAliveClient, pass: string, index: number): Promise<Reply[]>;
  /** Before each pass, not measured: brings about what the scenario measures (replays from memory: the receipts held). */
  prepare?(client: KeepAliveClient): Promise<void>;
}

/**
 * Replays cycle over the REPLAYED most recently created keys: the ones the replay cache of the process
 * that created them still holds (IDEMPOTENCY_REPLAY_CACHE_ENTRIES, 10,000 by default), however many
 * rounds ran before.
 */
const REPLAYED = 4_000;
const recent = (keys: string[], index: number): string | undefined => keys[keys.length - 1 - (index % Math.min(keys.length, REPLAYED))];

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
 * The scenarios, in the order they run. POSTs of the first-execution scenario remember their Location
 * so that the replay scenarios can check they get the same one back. The replays go to the process that
 * ran the first executions, which holds their receipts (ReplayCache), and to `elsewhere`, a second
 * command-api on the same database without that cache: a retry that reaches another instance behind a
 * load balancer. Unexpected replies are counted in warm-up too.
 */
export function commandPathScenarios(
  apiKey: string,
  orderId: string,
  concurrency: number,
  check: Expectations,
  elsewhere: { url: string; pid: number },
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
      orders: () => 0,
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
      orders: one,
      units: one,
      unit: async (client, pass, index) => {
        const key = `${pass}-first-${index}`;
        const reply = await client.send(create(key));
        const ok = reply.status === 201 && reply.headers['idempotent-replayed'] === undefined && !!reply.headers.location;
        check.expect('first execution', ok, () => describeReply(reply));
        if (ok) {
          created.set(key, String(reply.headers.location));
          createdKeys.push(key);
        }
        return [reply];
      },
    },
    ...(
      [
        ['replay', 'the process that ran the first executions, which holds their receipts in memory (ReplayCache)', undefined],
        ['replay, from the database', 'another command-api process on the same database, without that cache', elsewhere],
      ] as const
    ).map(([name, where, target]): Scenario => {
      const replay = async (client: KeepAliveClient, key: string) => {
        const reply = await client.send(create(key));
        const ok = reply.status === 201 && reply.headers['idempotent-replayed'] === 'true' && reply.headers.location === created.get(key);
        check.expect(name, ok, () => describeReply(reply));
        return [reply];
      };
      return {
        name,
        measures: `POST /v1/orders, key already used: the stored response, no new effect; sent to ${where}`,
        workers: concurrency,
        connections: concurrency,
        orders: () => 0,
        target,
        units: one,
        unit: (client, _phase, index) => replay(client, recent(createdKeys, index) ?? 'no-first-execution-succeeded'),
        // The process holds a receipt for IDEMPOTENCY_REPLAY_CACHE_SECONDS (60 by default) after its
        // last use, and the rounds' order puts other scenarios between the first executions and these
        // replays, for longer than that on a slow machine: a replay of each key, unmeasured, first.
        prepare: target
          ? undefined
          : async (client) => {
              const keys = createdKeys.slice(-REPLAYED);
              await closedLoop(keys.length, concurrency, (i) => replay(client, keys[i]));
            },
      };
    }),
    {
      name: '30 % retried',
      measures: 'POST /v1/orders, a mix: 3 of every 10 requests retry a key this scenario already used (replayed), 7 are fresh',
      workers: concurrency,
      connections: concurrency,
      orders: (units) => units - retries(units),
      units: one,
      unit: async (client, pass, index) => {
        const retry = isRetry(index) && index >= RETRY_DISTANCE;
        const key = `${pass}-mix-${retry ? index - RETRY_DISTANCE + 5 : index}`;
        const reply = await client.send(create(key));
        const ok = reply.status === 201 && (reply.headers['idempotent-replayed'] === 'true') === retry;
        check.expect('30 % retried', ok, () => `${retry ? 'retry' : 'fresh'} ${key}: ${describeReply(reply)}`);
        return [reply];
      },
    },
    {
      name: 'racing duplicates',
      measures: `POST /v1/orders, bursts of ${RACE_BURST} identical requests per fresh key: 1 created, ${RACE_BURST - 1} wait and replay`,
      workers: bursts,
      connections: bursts * RACE_BURST,
      orders: one,
      units: (requests) => Math.ceil(requests / RACE_BURST),
      unit: async (client, pass, index) => {
        const call = create(`${pass}-race-${index}`);
        const replies = await Promise.all(Array.from({ length: RACE_BURST }, () => client.send(call)));
        const fresh = replies.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
        const replayed = replies.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === 'true');
        const locations = new Set(replies.map((r) => r.headers.location));
        const ok = fresh.length === 1 && replayed.length === RACE_BURST - 1 && locations.size === 1;
        for (const reply of replies) {
          check.expect('racing duplicates', ok, () => `key ${call.headers['Idempotency-Key']}: ${describeReply(reply)}`);
        }
        return replies;
      },
    },
  ];
}

/**
 * The B5 peer (bench/peers/node-idempotency.ts: `@node-idempotency/nestjs` with Redis, the same order
 * and outbox transaction on a database of its own), in the workloads the command-api runs: fresh keys,
 * replays of them, the 30 % mix and racing duplicates. Its replays carry no Location, so a replay is
 * checked by the order id in the body. Its orders per key are counted in its database afterwards.
 */
export function peerScenarios(target: { url: string; pid: number }, concurrency: number, check: Expectations): Scenario[] {
  const body = JSON.stringify({ sku: 'BENCH-1', quantity: 1 });
  const create = (key: string): Call => ({
    method: 'POST',
    path: '/v1/orders',
    headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key },
    body,
  });
  const ids = new Map<string, string>();
  const keys: string[] = [];
  const orderId = (reply: Reply) => {
    try {
      return String(JSON.parse(reply.body).id);
    } catch {
      return undefined;
    }
  };
  /** One request per unit of work, sent to the peer by `concurrency` workers; none of its orders are in our database. */
  const oneByOne = { workers: concurrency, connections: concurrency, orders: () => 0, target, units: (requests: number) => requests };
  return [
    {
      name: 'peer: first execution',
      measures:
        'the same POST with a fresh key to @node-idempotency/nestjs 1.0.4 (Redis store, NestJS 10, same order + outbox transaction through bare pg)',
      ...oneByOne,
      unit: async (client, pass, index) => {
        const key = `${pass}-peer-${index}`;
        const reply = await client.send(create(key));
        const ok = reply.status === 201 && reply.headers['idempotent-replayed'] === undefined && !!orderId(reply);
        check.expect('peer: first execution', ok, () => describeReply(reply));
        if (ok) {
          ids.set(key, orderId(reply)!);
          keys.push(key);
        }
        return [reply];
      },
    },
    {
      name: 'peer: replay',
      measures: 'the peer, key already used: its stored response',
      ...oneByOne,
      unit: async (client, _phase, index) => {
        const key = recent(keys, index) ?? 'no-peer-execution-succeeded';
        const reply = await client.send(create(key));
        const ok = reply.status === 201 && reply.headers['idempotent-replayed'] === 'true' && orderId(reply) === ids.get(key);
        check.expect('peer: replay', ok, () => describeReply(reply));
        return [reply];
      },
    },
    {
      name: 'peer: 30 % retried',
      measures: 'the peer, the same mix: 3 of every 10 requests retry a key this scenario already used, 7 are fresh',
      ...oneByOne,
      unit: async (client, pass, index) => {
        const retry = isRetry(index) && index >= RETRY_DISTANCE;
        const key = `${pass}-peer-mix-${retry ? index - RETRY_DISTANCE + 5 : index}`;
        const reply = await client.send(create(key));
        const replayed = reply.headers['idempotent-replayed'] === 'true';
        const ok = reply.status === 201 && replayed === retry && !!orderId(reply) && (!retry || orderId(reply) === ids.get(key));
        check.expect('peer: 30 % retried', ok, () => `${retry ? 'retry' : 'fresh'} ${key}: ${describeReply(reply)}`);
        if (ok && !retry) ids.set(key, orderId(reply)!);
        return [reply];
      },
    },
    {
      name: 'peer: racing duplicates',
      measures:
        `the peer, bursts of ${RACE_BURST} identical requests per fresh key: it answers 1 and refuses the others at once ` +
        `(409, Retry-After: 1), which send again as soon as the first has its answer (sooner than Retry-After asks) until replayed`,
      workers: Math.ceil(concurrency / RACE_BURST),
      connections: Math.ceil(concurrency / RACE_BURST) * RACE_BURST,
      orders: () => 0,
      target,
      units: (requests) => Math.ceil(requests / RACE_BURST),
      unit: async (client, pass, index) => {
        const key = `${pass}-peer-race-${index}`;
        const call = create(key);
        const burst = await Promise.all(Array.from({ length: RACE_BURST }, () => client.send(call)));
        const fresh = burst.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
        const sent = [...burst];
        // Every caller ends with the order: a refused one asks again at once (the first caller has its answer
        // by now), then a few ms apart, until it is replayed: the most a client could get out of the peer.
        const answers = await Promise.all(
          burst.map(async (reply) => {
            for (let attempt = 0; reply.status === 409 && attempt < 200; attempt++) {
              if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 2));
              reply = await client.send(call);
              sent.push(reply);
            }
            return reply;
          }),
        );
        const ids = new Set(answers.map(orderId));
        const ok = fresh.length === 1 && answers.every((r) => r.status === 201) && ids.size === 1 && !ids.has(undefined);
        check.expect('peer: racing duplicates', ok, () => `key ${key}: ${answers.map(describeReply).join(' | ')}`);
        return sent;
      },
    },
  ];
}

/** The order the GET baseline reads, created through the API like any other. */
export async function seedOrder(baseUrl: string, apiKey: string): Promise<string> {
  const client = new KeepAliveClient(baseUrl, 1);
  try {
    const reply = await client.send({
      method: 'POST',
      path: '/v1/orders',
      headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json', 'Idempotency-Key': 'seed' },
      body: JSON.stringify({ sku: 'BENCH-0', quantity: 1 }),
    });
    if (reply.status !== 201) throw new Error(`seeding an order: ${reply.status} ${reply.body}`);
    return JSON.parse(reply.body).id;
  } finally {
    client.close();
  }
}

/** Replies the command-api at `managementUrl` answered from its replay cache so far (its metric). */
export async function replayCacheHits(managementUrl: string): Promise<number> {
  const text = await (await fetch(`${managementUrl}/metrics`)).text();
  return [...text.matchAll(/^idempotency_replay_cache_hits_total\{[^}]*\} (\d+)/gm)].reduce((sum, [, n]) => sum + Number(n), 0);
}
