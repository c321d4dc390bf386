import { createHash, randomUUID } from 'node:crypto';
import { RunningApp, startApp } from './support/apps';
import { ApiClientSession } from './support/command-api';
import { json, ops, OpsRun } from './support/ops-cli';
import { OrdersDb } from './support/orders-db';
import { CANONICAL_UUID_PATTERN } from '@app/contracts';

const tenantName = () => `ops-${randomUUID().slice(0, 8)}`;

/** A tenant only refused commands name: none of them may create a client for it. */
const refusedTenant = tenantName();

/** Refusals: [name, args, env, exit code, what the single stderr line says]. */
const refusals: [string, string[], Record<string, string>, number, RegExp][] = [
  ['clients:create without --tenant', ['clients:create', '--json'], {}, 2, /--tenant/],
  [
    'clients:create with an unknown operation',
    ['clients:create', '--tenant', refusedTenant, '--operations', 'orders.create,orders.delete'],
    {},
    2,
    /orders\.delete/,
  ],
  ['clients:create with a bad --tenant', ['clients:create', '--tenant', 'acme corp!', '--json'], {}, 2, /--tenant/],
  ['clients:revoke of a non-UUID', ['clients:revoke', 'client-1'], {}, 2, /UUID/],
  ['clients:revoke of an unknown UUID', ['clients:revoke', '00000000-0000-4000-8000-000000000000'], {}, 1, /no client/],
  [
    'clients:list with an unreachable database',
    ['clients:list', '--json'],
    { ORDERS_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/orders' },
    1,
    /cannot reach the orders database/,
  ],
];

describe('the ops CLI manages API clients and sweeps receipts', () => {
  let api: RunningApp;
  const db = new OrdersDb();
  let refused: Map<string, Promise<OpsRun>>;
  const tenant = tenantName();
  let create: Promise<OpsRun>;
  const sweep = {
    tenant: tenantName(),
    expired: ['expired-1', 'expired-2', 'expired-3', 'expired-4', 'expired-5', 'expired-now'],
    current: ['current-1', 'current-2', 'current-3'],
    run: undefined as Promise<OpsRun> | undefined,
  };

  beforeAll(async () => {
    // Receipts of a tenant of its own: five expired hours ago, one expiring this instant (now() >= expires_at
    // is expired, as the claim sees it), three still current.
    const insert = (key: string, expiresIn: string) =>
      db.pool.query(
        `INSERT INTO idempotency_receipts
           (tenant_id, operation, idempotency_key, fingerprint, fingerprint_version, region,
            response_status, response_headers, response_body, completed_at, expires_at)
         VALUES ($1, 'orders.create', $2, repeat('0', 64), 1, 'local', 201, '{}', '{}', now(), now() + $3::interval)`,
        [sweep.tenant, key, expiresIn],
      );
    await Promise.all([
      ...sweep.expired.map((key, i) => insert(key, key === 'expired-now' ? '0 seconds' : `-${i + 1} hours`)),
      ...sweep.current.map((key, i) => insert(key, `${i + 1} hours`)),
    ]);
    // Every CLI run boots Nest (about half a second of CPU). The runs that need no app start now and
    // overlap with the app's own start.
    create = ops(['clients:create', '--tenant', tenant, '--operations', 'orders.create,orders.cancel', '--json']);
    sweep.run = ops(['receipts:sweep', '--batch-size', '2', '--json']);
    refused = new Map(refusals.map(([name, args, env]) => [name, ops(args, env)]));
    // No in-process sweeper: the sweep test counts what `receipts:sweep` deletes.
    api = await startApp('command-api', { RECEIPT_SWEEP_INTERVAL_SECONDS: '0', LOG_LEVEL: 'warn' });
  });
  afterAll(async () => {
    await Promise.allSettled([...refused.values(), sweep.run, create]);
    await api.stop();
    await db.close();
  });

  it('clients:create --json prints the key once and it places orders; clients:revoke ends it; clients:list never shows a key', async () => {
    const created = json(await create);
    expect(created).toEqual({
      tenant,
      clientId: expect.stringMatching(CANONICAL_UUID_PATTERN),
      apiKey: expect.stringMatching(/^ik_[A-Za-z0-9_-]{43}$/),
      operations: ['orders.create', 'orders.cancel'],
    });
    // A second client of the tenant, with every operation, made the way the library does it.
    const sibling = await db.client(tenant);

    // Stored as printed: the permissions, and only a hash of the key.
    const { rows } = await db.pool.query(
      `SELECT id, allowed_operations, encode(key_sha256, 'hex') AS sha FROM api_clients WHERE tenant_id = $1`,
      [tenant],
    );
    const stored = rows.find((row) => row.id === created.clientId);
    expect(stored.allowed_operations).toEqual(['orders.create', 'orders.cancel']);
    expect(JSON.stringify(rows)).not.toContain(created.apiKey);
    expect(stored.sha).toBe(createHash('sha256').update(created.apiKey).digest('hex'));

    // The printed key works against the running API, with the tenant from the credential…
    const client = new ApiClientSession(api.url, created.apiKey);
    const placed = await client.createOrder('from-the-cli', { sku: 'SKU-1', quantity: 1 });
    expect(placed.status).toBe(201);
    expect((await db.pool.query('SELECT tenant_id FROM orders WHERE id = $1', [placed.body.id])).rows).toEqual([{ tenant_id: tenant }]);
    // …and only for what it was given: orders.read was left out.
    expect((await client.get(`/v1/orders/${placed.body.id}`)).status).toBe(403);

    const revoked = json(await ops(['clients:revoke', created.clientId, '--json']));
    expect(revoked).toEqual({ clientId: created.clientId, tenant, revokedAt: expect.any(String) });
    const refusedNow = await client.createOrder('after-revoke', { sku: 'SKU-1', quantity: 1 });
    expect(refusedNow.status).toBe(401);
    expect(refusedNow.body).toMatchObject({ type: '/problems/unauthenticated' });
    // The other client of the tenant is untouched.
    expect((await new ApiClientSession(api.url, sibling.apiKey).get(`/v1/orders/${placed.body.id}`)).status).toBe(200);

    // The listing names both clients, marks the revoked one, and holds no key material at all.
    const listed = json(await ops(['clients:list', '--json', '--tenant', tenant]));
    expect(listed).toHaveLength(2);
    for (const entry of listed) {
      expect(Object.keys(entry).sort()).toEqual(['clientId', 'createdAt', 'name', 'operations', 'revokedAt', 'tenant']);
    }
    const byId = Object.fromEntries(listed.map((entry: { clientId: string }) => [entry.clientId, entry]));
    expect(byId[created.clientId]).toMatchObject({ tenant, operations: ['orders.create', 'orders.cancel'], revokedAt: revoked.revokedAt });
    expect(byId[sibling.clientId]).toMatchObject({
      tenant,
      operations: ['orders.create', 'orders.cancel', 'orders.read'],
      revokedAt: null,
    });
    const listing = JSON.stringify(listed);
    for (const secret of [created.apiKey, sibling.apiKey, ...rows.map((row) => row.sha)]) expect(listing).not.toContain(secret);
  });

  it.each(refusals.map(([name, , , code, message]) => [name, code, message] as const))(
    '%s exits %i with one "ops: " line on stderr and nothing on stdout',
    async (name, code, message) => {
      const run = await refused.get(name)!;
      expect({ status: run.status, stdout: run.stdout }).toEqual({ status: code, stdout: '' });
      const lines = run.stderr.split('\n').filter(Boolean);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^ops: /);
      expect(lines[0]).toMatch(message);
      const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM api_clients WHERE tenant_id = $1', [refusedTenant]);
      expect(rows[0].n).toBe(0);
    },
  );

  it('receipts:sweep --batch-size 2 --json deletes every expired receipt, in batches, and nothing unexpired', async () => {
    const result = json(await sweep.run!);
    // compacted: receipts kept as tombstones (none of ours; test/an-expired-key-can-be-refused-by-a-tombstone).
    expect(Object.keys(result)).toEqual(['deleted', 'compacted']);
    // At least ours: other suites' expired receipts in orders_test go too.
    expect(result.deleted).toBeGreaterThanOrEqual(sweep.expired.length);

    const { rows } = await db.pool.query('SELECT idempotency_key FROM idempotency_receipts WHERE tenant_id = $1 ORDER BY idempotency_key', [
      sweep.tenant,
    ]);
    expect(rows.map((row) => row.idempotency_key)).toEqual(sweep.current);
  });
});
