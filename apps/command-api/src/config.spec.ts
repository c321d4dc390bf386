import { ConfigError, parseConfig } from '@app/platform';
import { commandApiConfig } from './config';

describe('command API configuration: the API client cache', () => {
  it('caches for 60 s by default', () => {
    expect(parseConfig(commandApiConfig, {})).toMatchObject({ API_KEY_CACHE_SECONDS: 60, DATABASE_POOL_SIZE: 10 });
  });

  it('refuses a pool of one while the cache is on (its listener would hold the only connection), and accepts it with the cache off', () => {
    expect(() => parseConfig(commandApiConfig, { DATABASE_POOL_SIZE: '1' })).toThrow(ConfigError);
    expect(() => parseConfig(commandApiConfig, { DATABASE_POOL_SIZE: '1' })).toThrow(
      /DATABASE_POOL_SIZE: must be at least 2 while API_KEY_CACHE_SECONDS/,
    );
    expect(parseConfig(commandApiConfig, { DATABASE_POOL_SIZE: '1', API_KEY_CACHE_SECONDS: '0' })).toMatchObject({ DATABASE_POOL_SIZE: 1 });
  });
});

describe('command API configuration: tombstones after expiry', () => {
  const variables = ['IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CREATE', 'IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CANCEL'];

  it('keeps none by default (0: after expiry the same key is a new request)', () => {
    expect(parseConfig(commandApiConfig, {})).toMatchObject({
      IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CREATE: 0,
      IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CANCEL: 0,
    });
  });

  it.each(variables)('%s takes whole seconds from 0 to a year', (variable) => {
    for (const [value, parsed] of [
      ['0', 0],
      ['1', 1],
      ['604800', 604800],
      [String(365 * 24 * 3600), 365 * 24 * 3600],
    ] as const) {
      expect(parseConfig(commandApiConfig, { [variable]: value })).toMatchObject({ [variable]: parsed });
    }
  });

  it.each(variables)('%s refuses negatives, fractions, words and more than a year, naming the variable', (variable) => {
    for (const value of ['-1', '1.5', 'a week', String(365 * 24 * 3600 + 1)]) {
      expect(() => parseConfig(commandApiConfig, { [variable]: value })).toThrow(ConfigError);
      expect(() => parseConfig(commandApiConfig, { [variable]: value })).toThrow(new RegExp(`${variable}: .*\\(got "${value}"\\)`));
    }
  });
});

describe('command API configuration: statement lanes', () => {
  it('shares 2 connections among decided statements by default (1 with a pool of 1); 0 borrows one per statement', () => {
    expect(parseConfig(commandApiConfig, {})).toMatchObject({ DATABASE_STATEMENT_LANES: 2 });
    expect(parseConfig(commandApiConfig, { DATABASE_POOL_SIZE: '1', API_KEY_CACHE_SECONDS: '0' })).toMatchObject({
      DATABASE_STATEMENT_LANES: 1,
    });
    expect(parseConfig(commandApiConfig, { DATABASE_STATEMENT_LANES: '0' })).toMatchObject({ DATABASE_STATEMENT_LANES: 0 });
  });

  it('refuses more lanes than the pool has connections, negatives and fractions, naming the variable', () => {
    expect(() => parseConfig(commandApiConfig, { DATABASE_STATEMENT_LANES: '11' })).toThrow(
      /DATABASE_STATEMENT_LANES: must be at most DATABASE_POOL_SIZE/,
    );
    expect(parseConfig(commandApiConfig, { DATABASE_STATEMENT_LANES: '11', DATABASE_POOL_SIZE: '12' })).toMatchObject({
      DATABASE_STATEMENT_LANES: 11,
    });
    for (const value of ['-1', '1.5', 'two']) {
      expect(() => parseConfig(commandApiConfig, { DATABASE_STATEMENT_LANES: value })).toThrow(/DATABASE_STATEMENT_LANES: /);
    }
  });
});

describe('command API configuration: retention and the idempotency lock', () => {
  const retentions = [
    'IDEMPOTENCY_RETENTION_SECONDS',
    'IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CREATE',
    'IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CANCEL',
    'IDEMPOTENCY_RETENTION_SECONDS_NOT_FOUND',
  ];

  // A retention of 0 would make every retry a new action: idempotency off, silently.
  it.each(retentions)('%s refuses 0, negatives, fractions, words and more than a year, naming the variable', (variable) => {
    for (const value of ['0', '-1', '1.5', 'a day', String(365 * 24 * 3600 + 1)]) {
      expect(() => parseConfig(commandApiConfig, { [variable]: value })).toThrow(new RegExp(`${variable}: .*\\(got "${value}"\\)`));
    }
    expect(parseConfig(commandApiConfig, { [variable]: '1' })).toMatchObject({ [variable]: 1 });
  });

  // A duplicate waiting on the first request's claim must hear IDEMPOTENCY.IN_PROGRESS (409, Retry-After)
  // before the statement timeout cancels its statement (a 503 that says nothing of the claim).
  it('refuses an idempotency lock timeout not shorter than the statement timeout, naming it', () => {
    for (const lock of ['10000', '20000']) {
      expect(() => parseConfig(commandApiConfig, { IDEMPOTENCY_LOCK_TIMEOUT_MS: lock, DATABASE_STATEMENT_TIMEOUT_MS: '10000' })).toThrow(
        /IDEMPOTENCY_LOCK_TIMEOUT_MS: must be shorter than DATABASE_STATEMENT_TIMEOUT_MS/,
      );
    }
    expect(parseConfig(commandApiConfig, { IDEMPOTENCY_LOCK_TIMEOUT_MS: '9999', DATABASE_STATEMENT_TIMEOUT_MS: '10000' })).toMatchObject({
      IDEMPOTENCY_LOCK_TIMEOUT_MS: 9999,
    });
  });
});
