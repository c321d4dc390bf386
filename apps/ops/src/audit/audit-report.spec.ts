import { renderMismatch, renderReport } from './audit-report';

const settings = { limit: 1, graceSeconds: 30, outboxRetentionSeconds: 604800 };

describe('renderReport', () => {
  it('lists every check, then each failed one with its shown examples and hint', () => {
    const text = renderReport(
      {
        ok: false,
        checks: [
          { name: 'receipts-have-effects', checked: 3, mismatches: 0, examples: [] },
          {
            name: 'consumer-inbox-entries-have-outbox-rows',
            checked: 12,
            mismatches: 6,
            examples: [
              { problem: 'consumer remembers an event the orders database does not have', consumer: 'fulfillment', messageId: 'm-1' },
            ],
            hint: 'restored from an OLDER backup',
          },
        ],
      },
      settings,
    );
    expect(text.split('\n')).toEqual([
      'Audit (outbox retention 604800 s, grace 30 s): 1 of 2 checks found mismatches.',
      '',
      'ok    receipts-have-effects                    checked 3, mismatches 0',
      'FAIL  consumer-inbox-entries-have-outbox-rows  checked 12, mismatches 6',
      '',
      'consumer-inbox-entries-have-outbox-rows: 6 mismatch(es), the first 1',
      '  - consumer remembers an event the orders database does not have: consumer=fulfillment messageId=m-1',
      '  restored from an OLDER backup',
    ]);
  });

  it('says so when every check passed', () => {
    const text = renderReport(
      { ok: true, checks: [{ name: 'outbox-events-have-orders', checked: 0, mismatches: 0, examples: [] }] },
      settings,
    );
    expect(text).toMatch(/^Audit \(outbox retention 604800 s, grace 30 s\): all 1 checks passed\./);
  });

  it("shows a check's notes under its line, passed or not", () => {
    const text = renderReport(
      {
        ok: true,
        checks: [
          {
            name: 'notifier-events-have-webhook-deliveries',
            checked: 4,
            mismatches: 0,
            examples: [],
            notes: [
              { note: 'webhook deliveries pending, not a mismatch', pending: 2, oldestPendingAge: '5m 3s', oldestPendingSince: null },
            ],
          },
        ],
      },
      settings,
    );
    expect(text.split('\n').slice(2)).toEqual([
      'ok    notifier-events-have-webhook-deliveries  checked 4, mismatches 0',
      '      note: webhook deliveries pending, not a mismatch: pending=2 oldestPendingAge=5m 3s',
    ]);
  });
});

describe('renderMismatch', () => {
  it('leaves out fields without a value', () => {
    expect(renderMismatch({ problem: 'order has no OrderPlaced row in the outbox', order: 'o-1', orderTenant: null })).toBe(
      'order has no OrderPlaced row in the outbox: order=o-1',
    );
  });
});
