import fc from 'fast-check';
import { ApiClientSession } from './support/command-api';
import { RunningApp, startApp } from './support/apps';
import { HttpResult } from './support/http';
import { OrdersDb } from './support/orders-db';
import { searchSettings, searchTimeout } from './support/search';
import { CANONICAL_UUID_PATTERN } from '@app/contracts';

/**
 * Random rounds of concurrent `POST /v1/orders` against two real command-api processes on one
 * PostgreSQL (each request to either, as behind a load balancer), checked against
 * a small model of the contract (docs/idempotency.md): per (tenant, orders.create, key) at most one
 * execution, every later request in the scope replays it or is a 422, customerRef unique per tenant.
 *
 * Which request of a concurrent group executes is not determined. The model reads the winner off the
 * responses (the one answer that is not a replay and not a 422), checks that exactly one exists per
 * new scope and that it is one of the group's requests, then checks every other answer against it.
 *
 * Reproduce a failure with the seed and path fast-check prints: FC_SEED=… FC_PATH=… npx jest test/idempotency-matches
 */

// ---------------------------------------------------------------------------------------------
// Commands and their generators
// ---------------------------------------------------------------------------------------------

interface Command {
  /** Index into the run's fresh tenants (0 or 1). */
  tenant: number;
  /**
   * The command-api process it is sent to (0 or 1). Each answers a retry of what it ran from memory
   * (ReplayCache) and one of what the other ran from PostgreSQL: the answers must not differ.
   */
  process: number;
  key: string;
  sku: string;
  quantity: number;
  /** undefined: absent from the body; null: sent as null. The contract says both mean null. */
  customerRef?: string | null;
}

const KEYS = ['k0', 'k1', 'k2', 'k3'];

const commandFields = {
  process: fc.constantFrom(0, 1),
  key: fc.constantFrom(...KEYS),
  sku: fc.constantFrom('A', 'B'),
  quantity: fc.constantFrom(1, 2),
  customerRef: fc.constantFrom<string | null | undefined>(undefined, null, 'r1', 'r2'),
};
const command = fc.record({ tenant: fc.constantFrom(0, 1), ...commandFields });
/** A round: 1–6 commands sent at once, each on its own connection. */
const rounds = fc.array(fc.array(command, { minLength: 1, maxLength: 6 }), {
  minLength: 1,
  maxLength: 8,
});
/** The same commands without a tenant: the isolation property sends each one as both tenants. */
const mirroredRounds = fc.array(fc.array(fc.record(commandFields), { minLength: 1, maxLength: 3 }), {
  minLength: 1,
  maxLength: 8,
});

const scopeOf = (c: Command) => `${c.tenant}|${c.key}`;
/** The declared semantic fields, canonical: what "the same request" means within a scope. */
const fieldsOf = (c: Command) =>
  JSON.stringify({
    sku: c.sku,
    quantity: c.quantity,
    customerRef: c.customerRef ?? null,
  });
const bodyOf = (c: Command) => ({
  sku: c.sku,
  quantity: c.quantity,
  ...(c.customerRef !== undefined && { customerRef: c.customerRef }),
});

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

/** What a scope remembers after its first execution, and replays from then on. */
interface Receipt {
  fields: string;
  status: number;
  text: string;
  location: string | undefined;
  contentType: string | undefined;
  expires: string | undefined;
  orderId: string | null;
}

class Model {
  /** `${tenant}|${key}` -> the receipt of that scope. */
  readonly receipts = new Map<string, Receipt>();
  /** `${tenant}|${customerRef}` -> the order holding that reference. */
  readonly refs = new Map<string, string>();
  /** order id -> its tenant and the body it was created with. */
  readonly orders = new Map<string, { tenant: number; body: any }>();

  ordersOf(tenant: number) {
    return [...this.orders].filter(([, o]) => o.tenant === tenant);
  }
  scopesOf(tenant: number) {
    return [...this.receipts].filter(([scope]) => scope.startsWith(`${tenant}|`));
  }
}

const replayed = (r: HttpResult) => r.headers['idempotent-replayed'];
const isUuid = (s: unknown) => typeof s === 'string' && CANONICAL_UUID_PATTERN.test(s);

/** An answer that is the execution of its request: a new order, or the stored "customerRef already used". */
const isExecution = (r: HttpResult) =>
  replayed(r) === undefined && (r.status === 201 || (r.status === 409 && r.body?.type === '/problems/customer-ref-already-used'));

function show(c: Command, r?: HttpResult): string {
  const sent = `t${c.tenant} ${c.key} ${JSON.stringify(bodyOf(c))}`;
  if (!r) return sent;
  const flag = replayed(r) === undefined ? '' : ` replayed=${replayed(r)}`;
  return `${sent} -> ${r.status}${flag} location=${r.headers.location ?? '-'} ${r.text}`;
}

function must(condition: unknown, message: () => string): asserts condition {
  if (!condition) throw new Error(message());
}

/** Checks one round's answers against the model, then advances the model. */
function checkRound(model: Model, round: Command[], responses: HttpResult[]): void {
  const context = () => `round:\n  ${round.map((c, i) => show(c, responses[i])).join('\n  ')}`;
  const fail = (i: number, why: string) => () => `${why}\n  offending: ${show(round[i], responses[i])}\n${context()}`;

  const byScope = new Map<string, number[]>();
  round.forEach((c, i) => byScope.set(scopeOf(c), [...(byScope.get(scopeOf(c)) ?? []), i]));

  // 1. Every scope new in this round executed exactly one of its requests (any one of them).
  const winners: number[] = [];
  for (const [scope, members] of byScope) {
    if (model.receipts.has(scope)) continue;
    const executed = members.filter((i) => isExecution(responses[i]));
    must(executed.length === 1, () => `scope ${scope} is new: expected exactly 1 execution, got ${executed.length}\n${context()}`);
    winners.push(executed[0]);
  }

  // 2. The executions: a null customerRef always creates; a reference already held is 409 naming its
  //    order; a reference free before the round is taken by exactly one execution, the others get 409.
  const byRef = new Map<string, number[]>();
  for (const i of winners) {
    const c = round[i];
    if (c.customerRef == null) expectCreated(i);
    else byRef.set(`${c.tenant}|${c.customerRef}`, [...(byRef.get(`${c.tenant}|${c.customerRef}`) ?? []), i]);
  }
  for (const [ref, executions] of byRef) {
    let creator: number | undefined;
    if (!model.refs.has(ref)) {
      const created = executions.filter((i) => responses[i].status === 201);
      must(
        created.length === 1,
        () => `customerRef ${ref} was free: expected 1 of ${executions.length} executions to create, got ${created.length}\n${context()}`,
      );
      creator = created[0];
      expectCreated(creator);
    }
    const holder = model.refs.get(ref)!;
    for (const i of executions) if (i !== creator) expectRefTaken(i, holder);
  }
  for (const i of winners) {
    const r = responses[i];
    model.receipts.set(scopeOf(round[i]), {
      fields: fieldsOf(round[i]),
      status: r.status,
      text: r.text,
      location: r.headers.location as string | undefined,
      contentType: r.headers['content-type'] as string | undefined,
      expires: r.headers['idempotency-expires'] as string | undefined,
      orderId: r.status === 201 ? r.body.id : null,
    });
  }

  // 3. Everything else replays its scope's receipt byte for byte, or is a 422 if its fields differ.
  round.forEach((c, i) => {
    if (winners.includes(i)) return;
    const receipt = model.receipts.get(scopeOf(c))!;
    const r = responses[i];
    if (fieldsOf(c) === receipt.fields) {
      must(r.status === receipt.status, fail(i, `replay: expected status ${receipt.status}`));
      must(replayed(r) === 'true', fail(i, 'replay: expected Idempotent-Replayed: true'));
      must(r.text === receipt.text, fail(i, `replay: expected the stored body ${receipt.text}`));
      must(r.headers.location === receipt.location, fail(i, `replay: expected Location ${receipt.location}`));
      must(r.headers['content-type'] === receipt.contentType, fail(i, `replay: expected Content-Type ${receipt.contentType}`));
      must(r.headers['idempotency-expires'] === receipt.expires, fail(i, `replay: expected Idempotency-Expires ${receipt.expires}`));
    } else {
      must(r.status === 422, fail(i, 'same key, other fields: expected 422'));
      must(r.body?.type === '/problems/idempotency-key-reused', fail(i, 'expected type /problems/idempotency-key-reused'));
      must(replayed(r) === undefined && r.headers.location === undefined, fail(i, '422 must not look like a replay'));
    }
  });

  function expectCreated(i: number) {
    const c = round[i];
    const r = responses[i];
    must(r.status === 201, fail(i, 'expected a new order (201)'));
    must(isUuid(r.body?.id) && !model.orders.has(r.body.id), fail(i, 'expected a new order id'));
    must(r.headers.location === `/v1/orders/${r.body.id}`, fail(i, 'expected Location /v1/orders/{id}'));
    must(typeof r.headers['idempotency-expires'] === 'string', fail(i, 'expected Idempotency-Expires'));
    const expected = {
      sku: c.sku,
      quantity: c.quantity,
      customerRef: c.customerRef ?? null,
      status: 'placed',
    };
    must(
      Object.entries(expected).every(([k, v]) => r.body[k] === v) && r.body.cancelledAt === null,
      fail(i, `expected an order ${JSON.stringify(expected)}`),
    );
    model.orders.set(r.body.id, { tenant: c.tenant, body: r.body });
    if (c.customerRef != null) model.refs.set(`${c.tenant}|${c.customerRef}`, r.body.id);
  }

  function expectRefTaken(i: number, holder: string) {
    const r = responses[i];
    must(r.status === 409, fail(i, `customerRef held by ${holder}: expected 409`));
    must(r.body?.type === '/problems/customer-ref-already-used', fail(i, 'expected type /problems/customer-ref-already-used'));
    must(r.body.orderId === holder, fail(i, `expected orderId ${holder}`));
    must(r.headers.location === undefined, fail(i, 'a 409 has no Location'));
    must(String(r.headers['content-type']).startsWith('application/problem+json'), fail(i, 'expected problem+json'));
  }
}

// ---------------------------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------------------------

describe('idempotent order creation matches a model', () => {
  let apis: RunningApp[] = [];
  const db = new OrdersDb();

  beforeAll(async () => {
    apis = await Promise.all([0, 1].map(() => startApp('command-api', { DATABASE_POOL_SIZE: '20' })));
  });
  afterAll(async () => {
    await Promise.all(apis.map((api) => api.stop()));
    await db.close();
  });

  /** The search's settings (support/search.ts), shrinking a failure: each run has tenants of its own, and a short counterexample reads best. */
  const settings = (runs: { fast: number; long: number }): fc.Parameters<unknown> => ({ ...searchSettings(runs), endOnFailure: false });

  /** Two fresh tenants per run, so runs (and shrinking) never see each other's rows; `clients[p][t]`: tenant t on process p. */
  async function twoTenants() {
    const tenants = [await db.tenant(), await db.tenant()];
    return {
      tenants,
      clients: apis.map((api) => tenants.map((t) => new ApiClientSession(api.url, t.apiKey))),
    };
  }

  async function play(model: Model, clients: ApiClientSession[][], round: Command[]): Promise<HttpResult[]> {
    const responses = await Promise.all(round.map((c) => clients[c.process][c.tenant].createOrder(c.key, bodyOf(c))));
    checkRound(model, round, responses);
    return responses;
  }

  /** What the database and the read endpoints hold agrees with the model. */
  async function checkStore(model: Model, tenants: { tenantId: string }[], clients: ApiClientSession[]) {
    for (const [t, { tenantId }] of tenants.entries()) {
      const orders = model.ordersOf(t).length;
      expect(await db.counts(tenantId)).toEqual({
        orders,
        receipts: model.scopesOf(t).length,
        outbox: orders,
      });
      for (const [id, { body }] of model.ordersOf(t)) {
        const read = await clients[t].get(`/v1/orders/${id}`);
        expect({ status: read.status, body: read.body }).toEqual({
          status: 200,
          body,
        });
      }
      for (const [scope, receipt] of model.scopesOf(t)) {
        const key = scope.split('|')[1];
        const view = await clients[t].get(`/v1/idempotency-receipts/orders.create/${key}`);
        expect({
          status: view.status,
          responseStatus: view.body?.responseStatus,
          effect: view.body?.effect,
        }).toEqual({
          status: 200,
          responseStatus: receipt.status,
          effect: receipt.orderId === null ? null : { type: 'order', id: receipt.orderId },
        });
      }
    }
  }

  it(
    'random concurrent rounds: one execution per scope, every other answer a replay of it or a 422',
    async () => {
      await fc.assert(
        fc.asyncProperty(rounds, async (rounds) => {
          const { tenants, clients } = await twoTenants();
          const model = new Model();
          for (const round of rounds) await play(model, clients, round);
          await checkStore(model, tenants, clients[0]);
        }),
        settings({ fast: 50, long: 300 }),
      );
    },
    searchTimeout(180_000),
  );

  it(
    'two tenants sending the same keys and bodies never see each other’s orders',
    async () => {
      await fc.assert(
        fc.asyncProperty(mirroredRounds, async (rounds) => {
          const { tenants, clients } = await twoTenants();
          const model = new Model();
          const seen: Set<string>[] = [new Set(), new Set()];
          for (const commands of rounds) {
            // Each command as both tenants, all at once: same key, same body, different credential.
            const round = commands.flatMap((c) => [0, 1].map((tenant) => ({ ...c, tenant })));
            const responses = await play(model, clients, round);
            round.forEach((c, i) => {
              const { body, headers } = responses[i];
              for (const id of [
                body?.id,
                body?.orderId,
                String(headers.location ?? '')
                  .split('/')
                  .pop(),
              ]) {
                if (id) seen[c.tenant].add(id);
              }
            });
          }
          await checkStore(model, tenants, clients[0]);
          for (const t of [0, 1]) {
            // Every id a tenant was shown is one of its own orders; none is readable with the other credential.
            expect([...seen[t]].filter((id) => model.orders.get(id)?.tenant !== t)).toEqual([]);
            for (const [id] of model.ordersOf(t)) expect((await clients[0][1 - t].get(`/v1/orders/${id}`)).status).toBe(404);
          }
          expect([...seen[0]].filter((id) => seen[1].has(id))).toEqual([]);
        }),
        settings({ fast: 30, long: 200 }),
      );
    },
    searchTimeout(180_000),
  );
});
