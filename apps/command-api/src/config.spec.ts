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
