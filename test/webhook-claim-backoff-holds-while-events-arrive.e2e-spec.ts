import { randomUUID } from 'node:crypto';
import { Producer } from 'kafkajs';
import { OrderEventTypes } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { deliveriesOfTheirOwn } from './support/deliveries-of-their-own';
import { eventually } from './support/eventually';
import { produceOrderEvent, readyForNotifiers, testKafka } from './support/kafka';
import { LogLine, logLines } from './support/observe';
import { WebhookReceiver } from './support/webhook-receiver';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const STREAM_MS = 8_000;
const CLAIM_FAILED = 'cannot claim webhook deliveries; retrying';

/**
 * The claim fails (here a trigger refuses the claim's UPDATE, as a statement timeout, a lost
 * privilege or a broken plan would) while the consumer's inserts still work. Every recorded event
 * wakes the dispatcher; none may cut its backoff short, or it would send its failing claim about once
 * per event. Only the claim is refused: the trigger matches its statement (`leased_until = now() + …`),
 * not the recorder's INSERT or anything else.
 */
describe('a failing claim backs off while events keep being recorded', () => {
  const db = deliveriesOfTheirOwn('wqbackoff');
  const kafka = testKafka('webhook-claim-backoff');
  const receiver = new WebhookReceiver();
  let notifier: RunningApp | undefined;
  let producer: Producer;

  beforeAll(async () => {
    producer = await readyForNotifiers(kafka);
    await receiver.start();
    await db().query(/* sql */ `
      CREATE FUNCTION refuse_webhook_claims() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF current_query() LIKE '%leased_until = now() + make_interval%' THEN
          RAISE EXCEPTION 'webhook claims refused by the test';
        END IF;
        RETURN NULL;
      END $$`);
    const url = (db().options as { url: string }).url;
    notifier = await startApp('notifier', { NOTIFIER_DATABASE_URL: url, WEBHOOK_URL: receiver.url, WEBHOOK_TIMEOUT_MS: '2000' });
  }, 90_000);
  afterAll(async () => {
    await notifier?.stop();
    await producer?.disconnect();
    await receiver.stop();
  });

  const placeOrder = (tenantId: string) => {
    const orderId = randomUUID();
    return produceOrderEvent(producer, {
      type: OrderEventTypes.placed,
      tenantId,
      key: orderId,
      payload: { orderId, tenantId, sku: 'SKU-1', quantity: 1, customerRef: null, placedAt: new Date().toISOString() },
    });
  };
  const states = async (messageIds: string[]) =>
    (
      await db().query(
        /* sql */ `SELECT state, count(*)::int AS n FROM webhook_deliveries WHERE message_id = ANY($1::uuid[]) GROUP BY state`,
        [messageIds],
      )
    ).reduce((all: Record<string, number>, row: { state: string; n: number }) => ({ ...all, [row.state]: row.n }), {});
  const claimFailures = (): LogLine[] => logLines(notifier!).filter((line) => line.msg === CLAIM_FAILED);

  it(`${STREAM_MS / 1000} s of events while claims fail: attempts follow the backoff, not the events; all delivered once after`, async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const warmUp = await placeOrder(tenantId);
    await eventually(
      () => states([warmUp]),
      (s) => s.delivered === 1,
      { timeoutMs: 30_000, what: 'the warm-up webhook delivered' },
    );

    await db().query(/* sql */ `
      CREATE TRIGGER refuse_webhook_claims BEFORE UPDATE ON webhook_deliveries
      FOR EACH STATEMENT EXECUTE FUNCTION refuse_webhook_claims()`);
    const events: string[] = [];
    for (const end = Date.now() + STREAM_MS; Date.now() < end; await pause(30)) events.push(await placeOrder(tenantId));
    const streamEnded = Date.now();
    // The recorder kept up: every event is a pending delivery.
    await eventually(
      () => states(events),
      (s) => s.pending === events.length,
      { timeoutMs: 10_000, what: 'every event recorded' },
    );

    const failures = claimFailures().filter((line) => line.time <= streamEnded);
    // Each recorded event woke the dispatcher; it still tried no more often than its backoff allows
    // (100 ms doubling to 10 s, jittered: about 8 attempts in 8 s).
    expect(events.length).toBeGreaterThan(100);
    expect(failures.length).toBeGreaterThanOrEqual(3);
    expect(failures.every((line) => /refused by the test/.test(line.err?.message))).toBe(true);
    expect(failures.length).toBeLessThanOrEqual(20);
    // Nothing ended a wait early: each attempt came at least the wait its failure announced after it.
    const early = failures.slice(1).filter((line, i) => line.time - failures[i].time < failures[i].retryInMs - 5);
    expect(early).toEqual([]);
    expect(receiver.forTenant(tenantId).filter((r) => r.idempotencyKey !== warmUp)).toEqual([]);

    await db().query(/* sql */ `DROP TRIGGER refuse_webhook_claims ON webhook_deliveries`);
    // The backoff runs out (10 s at most), then the backlog goes at full speed.
    await eventually(
      () => states(events),
      (s) => s.delivered === events.length,
      { timeoutMs: 25_000, what: 'every webhook delivered once claims work again' },
    );
    const accepted = new Map<string, number>();
    for (const request of receiver.forTenant(tenantId)) {
      if (request.status < 300) accepted.set(request.idempotencyKey!, (accepted.get(request.idempotencyKey!) ?? 0) + 1);
    }
    expect([...events, warmUp].filter((id) => accepted.get(id) !== 1)).toEqual([]);
    expect(accepted.size).toBe(events.length + 1);
    console.log(
      `claims refused for ${STREAM_MS / 1000} s: ${events.length} events recorded, ${failures.length} claim attempts ` +
        `(waits ${failures.map((line) => line.retryInMs).join(', ')} ms); all delivered once after`,
    );
  }, 90_000);
});
