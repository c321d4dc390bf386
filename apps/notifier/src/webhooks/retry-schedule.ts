import ms from 'ms';

/** The longest wait one step may ask for: past a week, a receiver is gone, not slow. */
const MAX_STEP_MS = 7 * 24 * 3600 * 1000;

/**
 * `5s,5m,30m,2h` -> the waits before retries 1, 2, 3, 4 in ms. Each step is a duration `ms` reads
 * (`250ms`, `5s`, `30m`, `2h`, `3d`), positive and at most a week.
 */
export function parseRetrySchedule(text: string): { delaysMs: number[] } | { problem: string } {
  const steps = text.split(',').map((step) => step.trim());
  if (steps.some((step) => step === '')) return { problem: 'must be a comma-separated list of durations such as 5s,5m,30m,2h' };
  const delaysMs: number[] = [];
  for (const step of steps) {
    const value = /^\d+(\.\d+)?\s*[a-z]+$/i.test(step) ? ms(step as ms.StringValue) : undefined;
    if (value === undefined || !Number.isFinite(value) || value <= 0) {
      return { problem: `"${step}" is not a duration (write it like 500ms, 5s, 30m, 2h or 3d)` };
    }
    if (value > MAX_STEP_MS) return { problem: `"${step}" is longer than a week` };
    delaysMs.push(Math.round(value));
  }
  return { delaysMs };
}

/**
 * The wait before retrying a delivery that has failed `attempts` times, or undefined when the
 * schedule is spent (the delivery is dead). Jittered by up to ±10 %, so deliveries that failed
 * together (a receiver outage) do not come back in one burst.
 */
export function nextRetryDelay(schedule: number[], attempts: number, random: () => number = Math.random): number | undefined {
  const step = schedule[attempts - 1];
  if (step === undefined) return undefined;
  return Math.round(step * (0.9 + 0.2 * random()));
}
