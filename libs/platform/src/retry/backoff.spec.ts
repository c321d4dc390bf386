import fc from 'fast-check';
import { Backoff, backoffDelay } from './backoff';

describe('backoff', () => {
  it('doubles its ceiling per failure up to the cap and resets on success', () => {
    const top = new Backoff({ minMs: 100, maxMs: 1_000, random: () => 1 });
    expect([top.next(), top.next(), top.next(), top.next(), top.next()]).toEqual([100, 200, 400, 800, 1_000]);
    top.reset();
    expect(top.next()).toBe(100);
  });

  it('is failing from a failure until the next reset', () => {
    const backoff = new Backoff({ minMs: 100, maxMs: 1_000 });
    expect(backoff.failing).toBe(false);
    backoff.next();
    expect(backoff.failing).toBe(true);
    backoff.reset();
    expect(backoff.failing).toBe(false);
  });

  it('jitters between the minimum and the current ceiling', () => {
    const bottom = new Backoff({ minMs: 100, maxMs: 1_000, random: () => 0 });
    expect([bottom.next(), bottom.next(), bottom.next()]).toEqual([100, 100, 100]);
    expect(backoffDelay(2, { minMs: 100, maxMs: 1_000, random: () => 0.5 })).toBe(150);
  });

  it('stays within [min, max] for any attempt, however large', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -5, max: 10_000 }),
        fc.integer({ min: 1, max: 60_000 }),
        fc.integer({ min: 0, max: 600_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (attempt, minMs, extra, r) => {
          const delay = backoffDelay(attempt, { minMs, maxMs: minMs + extra, random: () => r });
          expect(delay).toBeGreaterThanOrEqual(minMs);
          expect(delay).toBeLessThanOrEqual(minMs + extra);
        },
      ),
    );
  });
});
