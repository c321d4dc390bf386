// The long runs of `npm run test:faults` (TEST_LONG=1) search for minutes.
jest.setTimeout(process.env.TEST_LONG === '1' ? 30 * 60_000 : 60_000);
