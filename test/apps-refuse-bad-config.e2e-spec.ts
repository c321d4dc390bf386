import { spawnSync } from 'node:child_process';
import { entryArgs } from './support/apps';

function boot(entry: string, env: Record<string, string>, args: string[] = []) {
  return spawnSync(process.execPath, [...entryArgs(entry), ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
}

describe('a bad configuration stops boot with one line naming the variable', () => {
  it.each([
    ['apps/command-api/src/main.ts', 'COMMAND_API_PORT', 'http'],
    ['apps/command-api/src/main.ts', 'IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CANCEL', '-1'],
    ['apps/command-api/src/main.ts', 'TRUSTED_PROXIES', 'loopback, my-proxy.internal'],
    ['apps/outbox-relay/src/main.ts', 'KAFKA_BROKERS', 'nowhere'],
    // Shorter than a claim round trip may take on a busy server: the relay would give back every claim ahead.
    ['apps/outbox-relay/src/main.ts', 'DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS', '500'],
    ['apps/fulfillment/src/main.ts', 'FULFILLMENT_DATABASE_URL', 'mysql://localhost/fulfillment'],
    ['apps/ops/src/main.ts', 'ORDERS_DATABASE_URL', 'not a url'],
    ['apps/notifier/src/main.ts', 'HTTP_REQUEST_TIMEOUT_SECONDS', '0'],
    // Above the whole request's bound (30 s by default): the head is part of the request.
    ['apps/webhook-receiver/src/main.ts', 'HTTP_HEADERS_TIMEOUT_SECONDS', '40'],
  ])('%s with %s=%s exits 1', (entry, variable, value) => {
    const result = boot(entry, { [variable]: value }, entry.includes('/ops/') ? ['db:migrate'] : []);
    expect(result.status).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`${variable}:`);
    expect(lines[0]).toContain(JSON.stringify(value));
  });
});

describe('test-only switches', () => {
  it.each([
    ['apps/command-api/src/main.ts', 'FAULT_INJECTION'],
    ['apps/fulfillment/src/main.ts', 'CRASH_AFTER_DATABASE_COMMIT'],
  ])('%s refuses %s=true unless NODE_ENV=test (development here, as npm start runs it)', (entry, variable) => {
    const result = boot(entry, { NODE_ENV: 'development', [variable]: 'true' });
    expect(result.status).toBe(1);
    expect(result.stderr.trim()).toMatch(new RegExp(`^[a-z-]+: .*${variable}: is a test-only switch .*: it needs NODE_ENV=test`));
  });
});
