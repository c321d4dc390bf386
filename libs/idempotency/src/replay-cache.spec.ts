import fc from 'fast-check';
import { fingerprint } from './fingerprint';
import { IdempotencyError } from './idempotency.error';
import { IdempotentRequest } from './receipt-store';
import { ReplayCache } from './replay-cache';
import { IdempotentResponse } from './run-idempotent';

const request = (key: string, quantity = 1): IdempotentRequest => ({
  scope: { tenantId: 't-1', operation: 'orders.create', key },
  fields: { sku: 'A', quantity },
  retentionSeconds: 86_400,
  region: 'local',
});

/** What runIdempotent returns for a receipt read or written by a transaction whose now() was `databaseNow`. */
const committed = (req: IdempotentRequest, databaseNow: number, expiresAt: number): IdempotentResponse => ({
  outcome: 'created',
  response: { status: 201, headers: { Location: '/v1/orders/o-1' }, body: { id: 'o-1' } },
  expiresAt: new Date(expiresAt),
  messageIds: ['m-1'],
  receipt: { fingerprint: fingerprint(req.fields), databaseNow: new Date(databaseNow) },
});

function refusal(act: () => unknown): string | undefined {
  try {
    act();
    return undefined;
  } catch (error) {
    return error instanceof IdempotencyError ? error.code : String(error);
  }
}

class FakeClock {
  constructor(public ms = 1_000) {}
  now(): number {
    return this.ms;
  }
}

describe('ReplayCache', () => {
  it('replays a committed receipt without its outbox ids, and refuses other fields under the same key as the store does', () => {
    const clock = new FakeClock();
    const cache = new ReplayCache({ entries: 10, maxSeconds: 60, clock });
    const began = cache.now();
    cache.remember(request('k'), committed(request('k'), 5_000, 5_000 + 86_400_000), began);

    expect(cache.replay(request('k'))).toEqual({
      outcome: 'replayed',
      response: committed(request('k'), 0, 0).response,
      expiresAt: new Date(5_000 + 86_400_000),
      messageIds: [],
    });
    expect(refusal(() => cache.replay(request('k', 2)))).toBe('IDEMPOTENCY.KEY_REUSED');
    expect(cache.replay(request('other'))).toBeUndefined();
    expect(cache.replay({ ...request('k'), scope: { ...request('k').scope, tenantId: 't-2' } })).toBeUndefined();
  });

  it('keeps an entry at most maxSeconds, holds at most `entries`, and holds nothing when either is 0', () => {
    const clock = new FakeClock();
    const cache = new ReplayCache({ entries: 2, maxSeconds: 60, clock });
    for (const key of ['a', 'b', 'c']) cache.remember(request(key), committed(request(key), 0, 86_400_000), clock.now());
    expect(['a', 'b', 'c'].map((key) => cache.replay(request(key)) !== undefined)).toEqual([false, true, true]);
    clock.ms += 60_000;
    expect(cache.replay(request('c'))).toBeDefined();
    clock.ms += 1;
    expect(cache.replay(request('c'))).toBeUndefined();

    for (const off of [new ReplayCache({ entries: 10, maxSeconds: 0, clock }), new ReplayCache({ entries: 0, maxSeconds: 60, clock })]) {
      off.remember(request('a'), committed(request('a'), 0, 86_400_000), clock.now());
      expect(off.replay(request('a'))).toBeUndefined();
    }
  });

  it('never replays once the database clock has reached expires_at, whatever the offset, drift and delays', () => {
    fc.assert(
      fc.property(
        fc.record({
          offsetMs: fc.double({ min: -1e9, max: 1e9, noNaN: true }),
          /** NTP slews a clock's pace by at most 500 ppm. */
          drift: fc.double({ min: -0.0005, max: 0.0005, noNaN: true }),
          began: fc.double({ min: 1, max: 1e7, noNaN: true }),
          /** From `began` to the transaction's start on the server: the request, a pool wait, a lock. */
          toStartMs: fc.double({ min: 0, max: 5_000, noNaN: true }),
          /** From the transaction's start to expires_at. */
          leftMs: fc.double({ min: 0.001, max: 120_000, noNaN: true }),
          rememberedAfterMs: fc.double({ min: 0, max: 5_000, noNaN: true }),
          askedAfterMs: fc.array(fc.double({ min: 0, max: 130_000, noNaN: true }), { maxLength: 10 }),
          /** Asked this close to the local moment the database clock reaches expires_at: where a wrong margin shows. */
          aroundExpiryMs: fc.array(fc.double({ min: -100, max: 100, noNaN: true }), { minLength: 1, maxLength: 10 }),
          maxSeconds: fc.integer({ min: 1, max: 120 }),
        }),
        (c) => {
          const clock = new FakeClock(c.began);
          const databaseAt = (local: number) => c.offsetMs + c.began + (local - c.began) * (1 + c.drift);
          const started = databaseAt(c.began) + c.toStartMs;
          const expires = started + c.leftMs;
          const cache = new ReplayCache({ entries: 10, maxSeconds: c.maxSeconds, clock });
          const began = cache.now();
          clock.ms = c.began + c.rememberedAfterMs;
          // Dates have whole milliseconds: PostgreSQL's microseconds arrive truncated.
          cache.remember(request('k'), committed(request('k'), Math.floor(started), Math.floor(expires)), began);
          const expiresLocally = c.began + (expires - databaseAt(c.began)) / (1 + c.drift);
          const asked = [...c.askedAfterMs.map((after) => clock.ms + after), ...c.aroundExpiryMs.map((near) => expiresLocally + near)];
          for (const at of asked.filter((at) => at >= clock.ms).sort((a, b) => a - b)) {
            clock.ms = at;
            if (cache.replay(request('k'))) {
              expect(databaseAt(clock.ms)).toBeLessThan(expires);
              expect(clock.ms - began).toBeLessThanOrEqual(c.maxSeconds * 1000);
            }
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('replays a receipt with time left, until shortly before it expires', () => {
    const clock = new FakeClock();
    const cache = new ReplayCache({ entries: 10, maxSeconds: 60, clock });
    const began = cache.now();
    // The transaction began 3 ms after `began` on the database clock (any offset), 10 s before expiry.
    cache.remember(request('k'), committed(request('k'), 1e12 + 3, 1e12 + 3 + 10_000), began);
    clock.ms = began + 9_970;
    expect(cache.replay(request('k'))).toBeDefined();
    clock.ms = began + 9_990;
    expect(cache.replay(request('k'))).toBeUndefined();
  });
});
