import { LoopWaits } from './loop-waits';

/** Whether `promise` has settled once `advance` ran (fake timers) and pending callbacks had their turn. */
async function settledAfter(promise: Promise<void>, advance: () => void): Promise<boolean> {
  let settled = false;
  void promise.then(() => (settled = true));
  advance();
  await Promise.resolve();
  await Promise.resolve();
  return settled;
}

describe('LoopWaits', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('ends a wait for work on news, and a backoff only when its time is up', async () => {
    const waits = new LoopWaits();
    expect(await settledAfter(waits.wait(1_000, 'work'), () => waits.notify())).toBe(true);

    const backoff = waits.wait(1_000, 'backoff');
    expect(await settledAfter(backoff, () => waits.notify())).toBe(false);
    expect(await settledAfter(backoff, () => jest.advanceTimersByTime(1_000))).toBe(true);
  });

  it('remembers news that came while the loop was busy or backing off: the next wait for work ends at once', async () => {
    const waits = new LoopWaits();
    waits.notify();
    const backoff = waits.wait(500, 'backoff');
    expect(await settledAfter(backoff, () => jest.advanceTimersByTime(499))).toBe(false);
    jest.advanceTimersByTime(1);
    await backoff;
    expect(await settledAfter(waits.wait(1_000, 'work'), () => undefined)).toBe(true);
    // Taken by that wait: the one after waits again.
    expect(await settledAfter(waits.wait(1_000, 'work'), () => undefined)).toBe(false);
  });

  it('takeNews answers once per piece of news', () => {
    const waits = new LoopWaits();
    expect(waits.takeNews()).toBe(false);
    waits.notify();
    expect(waits.takeNews()).toBe(true);
    expect(waits.takeNews()).toBe(false);
  });

  it('stop ends the wait under way, backoff or not, and every later one at once', async () => {
    const waits = new LoopWaits();
    expect(await settledAfter(waits.wait(60_000, 'backoff'), () => waits.stop())).toBe(true);
    expect(await settledAfter(waits.wait(60_000, 'backoff'), () => undefined)).toBe(true);
    expect(await settledAfter(waits.wait(60_000, 'work'), () => undefined)).toBe(true);
  });
});
