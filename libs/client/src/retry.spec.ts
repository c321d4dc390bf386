import fc from 'fast-check';
import { defaultRetryPolicy, parseRetryAfter, retryDelay } from './retry';

describe('retryDelay', () => {
  const policy = fc.record({
    deadlineMs: fc.constant(30_000),
    attemptTimeoutMs: fc.constant(10_000),
    baseDelayMs: fc.integer({ min: 1, max: 1_000 }),
    maxDelayMs: fc.integer({ min: 1, max: 60_000 }),
    minAttemptMs: fc.constant(250),
  });

  it('backs off within [0, min(max, base * 2^(attempt-1))], full jitter', () => {
    fc.assert(
      fc.property(
        policy,
        fc.integer({ min: 1, max: 200 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (p, attempt, draw) => {
          const delay = retryDelay(p, attempt, undefined, () => draw);
          expect(delay).toBeGreaterThanOrEqual(0);
          expect(delay).toBeLessThanOrEqual(Math.min(p.maxDelayMs, p.baseDelayMs * 2 ** (attempt - 1)));
        },
      ),
    );
  });

  it("never waits less than the server's Retry-After, and at most one base delay more", () => {
    fc.assert(
      fc.property(
        policy,
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 0, max: 120_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (p, attempt, after, draw) => {
          const delay = retryDelay(p, attempt, after, () => draw);
          expect(delay).toBeGreaterThanOrEqual(after);
          expect(delay).toBeLessThanOrEqual(after + p.baseDelayMs);
        },
      ),
    );
  });

  it('grows with the attempt until the cap', () => {
    const top = () => 0.999999;
    const delays = [1, 2, 3, 4, 5, 6, 7, 8].map((attempt) => Math.round(retryDelay(defaultRetryPolicy, attempt, undefined, top)));
    expect(delays).toEqual([100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000]);
  });
});

describe('parseRetryAfter', () => {
  it('reads delta-seconds and HTTP dates; anything else is absent', () => {
    const now = Date.parse('2026-12-04T12:00:00Z');
    expect(parseRetryAfter('2', now)).toBe(2_000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Fri, 04 Dec 2026 12:00:05 GMT', now)).toBe(5_000);
    expect(parseRetryAfter('Fri, 04 Dec 2026 11:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter(null, now)).toBeUndefined();
    expect(parseRetryAfter('', now)).toBeUndefined();
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter('-1', now)).toBeUndefined();
  });
});
