import { randomUUID } from 'node:crypto';
import { Client, Pool } from 'pg';
import { eventually } from './support/eventually';
import { json, ops, OpsRun } from './support/ops-cli';
import { PrivateDatabases, privateDatabases } from './support/private-stack';

type State = 'pending' | 'delivered' | 'dead';

interface Seed {
  tenant: string;
  order?: string;
  state: State;
  eventType?: string;
  attempts?: number;
  statusCode?: number | null;
  lastError?: string | null;
  /** When the delivery was recorded, seconds ago. */
  ageSeconds?: number;
  /** For a pending one: due this many seconds from now (negative: overdue). */
  dueInSeconds?: number;
  /** Leased (a dispatcher POSTing it) for this many more seconds. */
  leasedForSeconds?: number;
}

/** The refusal of a command: its exit code, nothing on stdout, one line on stderr. */
function refusal(run: OpsRun): { status: number | null; stdout: string; stderr: string[] } {
  return { status: run.status, stdout: run.stdout, stderr: run.stderr.trim().split('\n') };
}

/**
 * The webhooks:* operator commands against the notifier database of this suite's own (no notifier
 * runs there, so nothing but the commands changes a row): deliveries are seeded with SQL as the
 * notifier's consumer and dispatcher would have left them.
 */
describe('ops webhooks:list, webhooks:retry and webhooks:dead-letter', () => {
  let dbs: PrivateDatabases;
  let notifier: Pool;
  const webhooks = (args: string[]) => ops(args, dbs.env);

  async function seed(s: Seed): Promise<string> {
    const id = randomUUID();
    await notifier.query(
      /* sql */ `
      INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, event_type, url, payload, state, attempts, status_code, last_error,
                                      created_at, next_attempt_at, lease_id, leased_until, delivered_at, dead_at)
      VALUES ($1, $2, $3, $4, 'http://127.0.0.1:9/hooks', '{"type":"order.placed"}', $5::text, $6, $7, $8,
              now() - make_interval(secs => $9),
              CASE WHEN $5::text = 'pending' THEN now() + make_interval(secs => $10) END,
              CASE WHEN $11::float8 IS NOT NULL THEN gen_random_uuid() END, now() + make_interval(secs => $11::float8),
              CASE WHEN $5::text = 'delivered' THEN now() END, CASE WHEN $5::text = 'dead' THEN now() END)`,
      [
        id,
        s.tenant,
        s.order ?? randomUUID(),
        s.eventType ?? 'OrderPlaced',
        s.state,
        s.attempts ?? (s.state === 'pending' ? 0 : 1),
        s.statusCode === undefined ? (s.state === 'delivered' ? 204 : null) : s.statusCode,
        s.lastError ?? null,
        s.ageSeconds ?? 0,
        s.dueInSeconds ?? 3600,
        s.leasedForSeconds ?? null,
      ],
    );
    return id;
  }

  async function rows(ids: string[]): Promise<any[]> {
    const { rows } = await notifier.query(`SELECT * FROM webhook_deliveries WHERE message_id = ANY($1::uuid[]) ORDER BY sequence`, [ids]);
    return rows;
  }

  const tenant = () => `wh-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    dbs = await privateDatabases('webhooks');
    notifier = new Pool({ connectionString: dbs.notifierUrl, max: 2 });
  });

  afterAll(async () => {
    await notifier?.end();
  });

  it('lists deliveries newest first with counts per state and the oldest pending age, filtered by state, order and tenant', async () => {
    const t = tenant();
    const order = randomUUID();
    const delivered = await seed({ tenant: t, order, state: 'delivered', attempts: 1, ageSeconds: 900 });
    const retrying = await seed({
      tenant: t,
      order,
      state: 'pending',
      attempts: 2,
      statusCode: 503,
      lastError: 'HTTP 503',
      ageSeconds: 600,
    });
    const behind = await seed({ tenant: t, order, state: 'pending', eventType: 'OrderCancelled', ageSeconds: 300 });
    const dead = await seed({ tenant: t, state: 'dead', attempts: 8, statusCode: 500, lastError: 'retry schedule spent after 8 attempts' });
    const inFlight = await seed({ tenant: t, state: 'pending', attempts: 1, dueInSeconds: -5, leasedForSeconds: 35 });
    await seed({ tenant: tenant(), state: 'dead' });

    const [all, deadOnly, ofOrder, limited, text] = await Promise.all([
      webhooks(['webhooks:list', '--tenant', t, '--json']),
      webhooks(['webhooks:list', '--tenant', t, '--state', 'dead', '--json']),
      webhooks(['webhooks:list', '--order', order.toUpperCase(), '--json']),
      webhooks(['webhooks:list', '--tenant', t, '--limit', '1', '--json']),
      webhooks(['webhooks:list', '--tenant', t]),
    ]);

    const listed = json(all);
    expect(listed.summary).toEqual({ pending: 3, delivered: 1, dead: 1, inFlight: 1, oldestPendingAgeSeconds: expect.any(Number) });
    expect(listed.summary.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(600);
    expect(listed.deliveries.map((d: any) => d.messageId)).toEqual([inFlight, dead, behind, retrying, delivered]);
    const byId = Object.fromEntries(listed.deliveries.map((d: any) => [d.messageId, d]));
    expect(byId[retrying]).toMatchObject({
      tenant: t,
      order,
      eventType: 'OrderPlaced',
      state: 'pending',
      attempts: 2,
      statusCode: 503,
      lastError: 'HTTP 503',
      inFlight: false,
      nextAttemptAt: expect.any(String),
      waitingBehind: null,
      deliveredAt: null,
      deadAt: null,
    });
    expect(byId[behind]).toMatchObject({ eventType: 'OrderCancelled', waitingBehind: retrying });
    expect(byId[inFlight]).toMatchObject({ state: 'pending', inFlight: true, leasedUntil: expect.any(String) });
    expect(byId[dead]).toMatchObject({
      state: 'dead',
      attempts: 8,
      lastError: 'retry schedule spent after 8 attempts',
      nextAttemptAt: null,
    });
    expect(byId[delivered]).toMatchObject({ state: 'delivered', statusCode: 204, deliveredAt: expect.any(String) });

    // The summary counts every state of the selection, whatever --state and --limit show (the runs overlap: ages differ by a second).
    const summary = { ...listed.summary, oldestPendingAgeSeconds: expect.any(Number) };
    expect(json(deadOnly)).toEqual({ summary, deliveries: [expect.objectContaining({ messageId: dead })] });
    const order1 = json(ofOrder);
    expect(order1.summary).toMatchObject({ pending: 2, delivered: 1, dead: 0, inFlight: 0 });
    expect(order1.deliveries.map((d: any) => d.messageId)).toEqual([behind, retrying, delivered]);
    expect(json(limited)).toEqual({ summary, deliveries: [expect.objectContaining({ messageId: inFlight })] });

    expect(text.status).toBe(0);
    expect(text.stderr).toBe('');
    const lines = text.stdout.trim().split('\n');
    expect(lines[0]).toMatch(
      new RegExp(
        `^Webhook deliveries of tenant ${t}: 3 pending \\(1 in flight, the oldest recorded 1[01]m( \\d+s)? ago\\), 1 delivered, 1 dead$`,
      ),
    );
    expect(lines).toHaveLength(6);
    expect(lines.find((line) => line.includes(dead))).toMatch(
      /dead .* attempts 8 {2}dead \S+ {2}last HTTP 500 {2}retry schedule spent after 8 attempts$/,
    );
    expect(lines.find((line) => line.includes(behind))).toContain(`(after ${retrying})`);
    expect(lines.find((line) => line.includes(inFlight))).toMatch(/in flight until /);
  });

  it('retries a dead delivery from scratch and makes a pending one due now, keeping the last error', async () => {
    const t = tenant();
    const dead = await seed({ tenant: t, state: 'dead', attempts: 8, statusCode: 500, lastError: 'retry schedule spent after 8 attempts' });
    const waiting = await seed({ tenant: t, state: 'pending', attempts: 3, statusCode: 503, lastError: 'HTTP 503', dueInSeconds: 7200 });

    const result = json(await webhooks(['webhooks:retry', dead.toUpperCase(), waiting, '--json']));
    expect(result).toEqual({
      dryRun: false,
      selected: [
        expect.objectContaining({ messageId: dead, tenant: t, from: 'dead', attempts: 8, nextAttemptAt: expect.any(String) }),
        expect.objectContaining({ messageId: waiting, from: 'pending', attempts: 3, nextAttemptAt: expect.any(String) }),
      ],
      skipped: [],
    });
    const [{ now }] = (await notifier.query(`SELECT now() AS now`)).rows;
    const [revived, hurried] = await rows([dead, waiting]);
    expect(revived).toMatchObject({
      state: 'pending',
      attempts: 0,
      dead_at: null,
      status_code: 500,
      last_error: 'retry schedule spent after 8 attempts',
    });
    expect(revived.next_attempt_at.getTime()).toBeLessThanOrEqual(now.getTime());
    expect(hurried).toMatchObject({ state: 'pending', attempts: 3, last_error: 'HTTP 503' });
    expect(hurried.next_attempt_at.getTime()).toBeLessThanOrEqual(now.getTime());
  });

  it('changes nothing when a named delivery is unknown, delivered or in flight', async () => {
    const t = tenant();
    const dead = await seed({ tenant: t, state: 'dead' });
    const delivered = await seed({ tenant: t, state: 'delivered' });
    const inFlight = await seed({ tenant: t, state: 'pending', attempts: 1, dueInSeconds: -1, leasedForSeconds: 60 });
    const unknown = randomUUID();
    const before = await rows([dead, delivered, inFlight]);

    const [withUnknown, withDelivered, withInFlight, withDeliveredText] = await Promise.all([
      webhooks(['webhooks:retry', dead, unknown, '--json']),
      webhooks(['webhooks:retry', dead, delivered, '--json']),
      webhooks(['webhooks:retry', dead, inFlight, '--json']),
      webhooks(['webhooks:retry', delivered]),
    ]);
    expect(refusal(withUnknown)).toEqual({
      status: 1,
      stdout: '',
      stderr: [`ops: no webhook delivery ${unknown} (see webhooks:list); nothing changed`],
    });
    expect(refusal(withDelivered)).toEqual({
      status: 1,
      stdout: '',
      stderr: [expect.stringMatching(new RegExp(`^ops: refused, nothing retried: ${delivered}: already delivered at .* give --redeliver`))],
    });
    expect(refusal(withInFlight)).toEqual({
      status: 1,
      stdout: '',
      stderr: [expect.stringMatching(new RegExp(`^ops: refused, nothing retried: ${inFlight}: in flight: a dispatcher is POSTing it`))],
    });
    expect(withDeliveredText.status).toBe(1);
    expect(await rows([dead, delivered, inFlight])).toEqual(before);
  });

  it('shows what it would retry on --dry-run, retries every dead one of a tenant with --all-dead, and sends a delivered one again with --redeliver', async () => {
    const t = tenant();
    const other = tenant();
    const first = await seed({ tenant: t, state: 'dead', attempts: 8, lastError: 'HTTP 500' });
    const second = await seed({ tenant: t, state: 'dead', attempts: 1, statusCode: 410, lastError: 'refused: HTTP 410' });
    const pending = await seed({ tenant: t, state: 'pending' });
    const othersDead = await seed({ tenant: other, state: 'dead' });
    const delivered = await seed({ tenant: t, state: 'delivered' });
    const before = await rows([first, second, pending, othersDead, delivered]);

    const dryRun = json(await webhooks(['webhooks:retry', '--all-dead', '--tenant', t, '--dry-run', '--json']));
    expect(dryRun).toEqual({
      dryRun: true,
      selected: [
        expect.objectContaining({ messageId: first, nextAttemptAt: null }),
        expect.objectContaining({ messageId: second, nextAttemptAt: null }),
      ],
      skipped: [],
    });
    expect(await rows([first, second, pending, othersDead, delivered])).toEqual(before);

    const text = await webhooks(['webhooks:retry', '--all-dead', '--tenant', t]);
    expect(text.status).toBe(0);
    expect(text.stdout).toContain('Retried 2 webhook delivery(ies):');
    expect(text.stdout).toContain(`${second}  OrderPlaced  tenant ${t}`);
    const after = await rows([first, second, othersDead]);
    expect(after.map((row) => [row.state, row.attempts])).toEqual([
      ['pending', 0],
      ['pending', 0],
      ['dead', 1],
    ]);
    expect(json(await webhooks(['webhooks:retry', '--all-dead', '--tenant', t, '--json']))).toEqual({
      dryRun: false,
      selected: [],
      skipped: [],
    });

    const redelivered = json(await webhooks(['webhooks:retry', delivered, '--redeliver', '--json']));
    expect(redelivered.selected).toEqual([expect.objectContaining({ messageId: delivered, from: 'delivered' })]);
    expect((await rows([delivered]))[0]).toMatchObject({ state: 'pending', attempts: 0, delivered_at: null, status_code: 204 });
  });

  it('gives up pending deliveries with the reason as their last error, refusing delivered, dead, in-flight and unknown ones', async () => {
    const t = tenant();
    const a = await seed({ tenant: t, state: 'pending', attempts: 4, lastError: 'HTTP 503' });
    const b = await seed({ tenant: t, state: 'pending' });
    const delivered = await seed({ tenant: t, state: 'delivered' });
    const inFlight = await seed({ tenant: t, state: 'pending', dueInSeconds: -1, leasedForSeconds: 60 });
    const before = await rows([a, b, delivered, inFlight]);

    const [withDelivered, withInFlight, withUnknown] = await Promise.all([
      webhooks(['webhooks:dead-letter', a, delivered, '--reason', 'endpoint retired']),
      webhooks(['webhooks:dead-letter', a, inFlight, '--reason', 'endpoint retired']),
      webhooks(['webhooks:dead-letter', a, randomUUID(), '--reason', 'endpoint retired']),
    ]);
    expect(refusal(withDelivered)).toEqual({
      status: 1,
      stdout: '',
      stderr: [expect.stringMatching(new RegExp(`^ops: refused, nothing dead-lettered: ${delivered}: already delivered at `))],
    });
    expect(refusal(withInFlight).stderr).toEqual([expect.stringMatching(new RegExp(`${inFlight}: in flight`))]);
    expect(refusal(withUnknown).stderr).toEqual([expect.stringMatching(/^ops: no webhook delivery .*nothing changed$/)]);
    expect(await rows([a, b, delivered, inFlight])).toEqual(before);

    const result = json(await webhooks(['webhooks:dead-letter', a, b, '--reason', 'endpoint retired by the customer', '--json']));
    expect(result).toEqual({
      reason: 'endpoint retired by the customer',
      deadLettered: [
        expect.objectContaining({ messageId: a, attempts: 4, deadAt: expect.any(String) }),
        expect.objectContaining({ messageId: b, attempts: 0, deadAt: expect.any(String) }),
      ],
    });
    expect((await rows([a, b])).map((row) => [row.state, row.last_error, row.dead_at instanceof Date])).toEqual([
      ['dead', 'endpoint retired by the customer', true],
      ['dead', 'endpoint retired by the customer', true],
    ]);

    const again = await webhooks(['webhooks:dead-letter', a, '--reason', 'twice']);
    expect(refusal(again).stderr).toEqual([expect.stringMatching(new RegExp(`${a}: already dead since `))]);
  });

  /**
   * A dispatcher may lease a delivery while a command is about to change it. The command locks what it
   * names before it looks: it then waits for the dispatcher's lease to commit, sees the delivery in
   * flight and refuses, instead of deciding on the row as it was and overwriting a POST under way.
   */
  it('waits for a dispatcher leasing a named delivery at that moment, then refuses it as in flight', async () => {
    const pending = await seed({ tenant: tenant(), state: 'pending', dueInSeconds: -1 });
    const dispatcher = new Client({ connectionString: dbs.notifierUrl });
    await dispatcher.connect();
    try {
      await dispatcher.query('BEGIN');
      await dispatcher.query(
        `UPDATE webhook_deliveries SET lease_id = gen_random_uuid(), leased_until = now() + interval '1 minute' WHERE message_id = $1`,
        [pending],
      );
      const commands = Promise.all([
        webhooks(['webhooks:dead-letter', pending, '--reason', 'endpoint retired']),
        webhooks(['webhooks:retry', pending]),
      ]);
      await eventually(
        async () =>
          (
            await notifier.query(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'ops' AND wait_event_type = 'Lock'`,
            )
          ).rows[0].n,
        (waiting) => waiting === 2,
        { timeoutMs: 60_000, what: 'both commands waiting on the delivery' },
      );
      await dispatcher.query('COMMIT');
      const [deadLetter, retry] = await commands;
      expect(refusal(deadLetter).stderr).toEqual([expect.stringMatching(new RegExp(`${pending}: in flight`))]);
      expect(refusal(retry).stderr).toEqual([expect.stringMatching(new RegExp(`${pending}: in flight`))]);
      const [row] = await rows([pending]);
      expect({ state: row.state, leased: row.lease_id !== null, lastError: row.last_error }).toEqual({
        state: 'pending',
        leased: true,
        lastError: null,
      });
    } finally {
      await dispatcher.end();
    }
  }, 120_000);

  it.each([
    ['an unknown state', ['webhooks:list', '--state', 'failed'], /--state must be one of pending, delivered, dead/],
    ['an order that is not a UUID', ['webhooks:list', '--order', '42'], /--order must be an order id/],
    ['a limit of 0', ['webhooks:list', '--limit', '0'], /--limit must be an integer 1-1000/],
    ['a retry of nothing', ['webhooks:retry'], /name the message-ids to retry/],
    ['named ids and --all-dead', ['webhooks:retry', randomUUID(), '--all-dead'], /not both/],
    ['--tenant with named ids', ['webhooks:retry', randomUUID(), '--tenant', 'acme'], /--tenant narrows --all-dead/],
    ['a message-id that is not a UUID', ['webhooks:retry', 'abc'], /not a message-id \(UUID\): abc/],
    ['a dead-letter without --reason', ['webhooks:dead-letter', randomUUID()], /--reason <text> is required/],
    ['a blank --reason', ['webhooks:dead-letter', randomUUID(), '--reason', ' '], /--reason must be 1-500 characters/],
    ['an unknown flag', ['webhooks:list', '--since', 'yesterday'], /unknown option '--since'/],
  ])('refuses %s as bad usage, with one line', async (_, args, reason) => {
    const refused = await webhooks(args);
    expect(refusal(refused)).toEqual({ status: 2, stdout: '', stderr: [expect.stringMatching(reason)] });
  });
});
