import { Backoff } from './backoff';

describe('Backoff', () => {
  it('doubles its ceiling per failure up to the cap and resets on success', () => {
    const top = new Backoff(100, 1_000, () => 1);
    expect([top.next(), top.next(), top.next(), top.next(), top.next()]).toEqual([100, 200, 400, 800, 1_000]);
    top.reset();
    expect(top.next()).toBe(100);
  });

  it('jitters between the minimum and the current ceiling', () => {
    const bottom = new Backoff(100, 1_000, () => 0);
    expect([bottom.next(), bottom.next(), bottom.next()]).toEqual([100, 100, 100]);
    const half = new Backoff(100, 1_000, () => 0.5);
    half.next();
    expect(half.next()).toBe(150);
  });
});
