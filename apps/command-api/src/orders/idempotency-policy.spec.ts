import { ConfigService } from '@nestjs/config';
import { Operations } from '@app/contracts';
import { parseConfig } from '@app/platform';
import { CommandApiConfig, commandApiConfig } from '../config';
import { IdempotencyPolicy } from './idempotency-policy';

function policy(env: Record<string, string>): IdempotencyPolicy {
  return new IdempotencyPolicy(new ConfigService<CommandApiConfig, true>(parseConfig(commandApiConfig, env)));
}

describe('the idempotency policy', () => {
  it("gives each operation its own retention and tombstone, from its own variables, and the deployment's retention otherwise", () => {
    const set = policy({
      IDEMPOTENCY_RETENTION_SECONDS: '100',
      IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CANCEL: '300',
      IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CREATE: '7',
      IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CANCEL: '11',
      IDEMPOTENCY_RETENTION_SECONDS_NOT_FOUND: '5',
      SERVICE_REGION: 'eu-1',
    });
    expect(set.request('t', Operations.createOrder, 'k', { a: 1 })).toEqual({
      scope: { tenantId: 't', operation: Operations.createOrder, key: 'k' },
      fields: { a: 1 },
      retentionSeconds: 100,
      tombstoneSeconds: 7,
      region: 'eu-1',
    });
    expect(set.request('t', Operations.cancelOrder, 'k', {})).toMatchObject({ retentionSeconds: 300, tombstoneSeconds: 11 });
    expect(set.retentionSeconds(Operations.cancelOrder)).toBe(300);
    expect(set.notFoundRetentionSeconds).toBe(5);
  });

  it('keeps a day and no tombstone by default', () => {
    const defaults = policy({});
    for (const operation of [Operations.createOrder, Operations.cancelOrder]) {
      expect(defaults.request('t', operation, 'k', {})).toMatchObject({ retentionSeconds: 24 * 3600, tombstoneSeconds: 0 });
    }
  });
});
