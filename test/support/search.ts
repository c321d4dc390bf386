import fc from 'fast-check';

/** True under `npm run test:faults`: suites that search run their long settings. */
export const LONG_RUN = process.env.TEST_LONG === '1';

/**
 * fast-check settings for a searching test: `runs.fast` in `npm test`, `runs.long` in `npm run
 * test:faults`; FC_SEED and FC_PATH replay a reported failure. Stops at the first failure (no
 * shrinking): each run talks to real servers, and the counterexample printed is already concrete.
 */
export function searchSettings<T>(runs: { fast: number; long: number }): fc.Parameters<T> {
  return {
    numRuns: LONG_RUN ? runs.long : runs.fast,
    endOnFailure: true,
    ...(process.env.FC_SEED && { seed: Number(process.env.FC_SEED) }),
    ...(process.env.FC_PATH && { path: process.env.FC_PATH }),
  };
}

/** A searching test's timeout: `fastMs` in `npm test`; an hour under `npm run test:faults`, where it only bounds a hang. */
export function searchTimeout(fastMs: number): number {
  return LONG_RUN ? 60 * 60_000 : fastMs;
}
