import fc from 'fast-check';
import { nextRetryDelay, parseRetrySchedule } from './retry-schedule';

describe('parseRetrySchedule', () => {
  it('reads the default Standard Webhooks schedule', () => {
    expect(parseRetrySchedule('5s,5m,30m,2h,5h,10h,10h')).toEqual({
      delaysMs: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
    });
  });

  it('accepts milliseconds, days and spaces around steps', () => {
    expect(parseRetrySchedule(' 250ms , 1d')).toEqual({ delaysMs: [250, 86_400_000] });
  });

  it.each(['', '5s,,5m', 'soon', '5', '-5s', '0s', '8d', '5 parsecs'])('refuses %j with a reason', (text) => {
    expect(parseRetrySchedule(text)).toEqual({ problem: expect.any(String) });
  });
});

describe('nextRetryDelay', () => {
  it('follows the schedule within ±10 % and ends when it is spent', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 10_000_000 }), { minLength: 1, maxLength: 10 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (schedule, r) => {
          schedule.forEach((step, i) => {
            const delay = nextRetryDelay(schedule, i + 1, () => r)!;
            expect(delay).toBeGreaterThanOrEqual(Math.floor(step * 0.9));
            expect(delay).toBeLessThanOrEqual(Math.ceil(step * 1.1));
          });
          expect(nextRetryDelay(schedule, schedule.length + 1, () => r)).toBeUndefined();
        },
      ),
    );
  });
});
