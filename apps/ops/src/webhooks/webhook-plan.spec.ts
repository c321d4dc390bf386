import { CliError, ExitCode } from '../cli-error';
import { DeliveryRecord, planDeadLetter, planRetry } from './webhook-plan';

const at = new Date('2026-12-03T10:00:00Z');

function row(messageId: string, state: DeliveryRecord['state'], extra: Partial<DeliveryRecord> = {}): DeliveryRecord {
  return {
    messageId,
    tenant: 'acme',
    order: 'o-1',
    eventType: 'OrderPlaced',
    state,
    attempts: state === 'pending' ? 2 : 8,
    statusCode: state === 'delivered' ? 204 : 503,
    inFlight: false,
    leasedUntil: null,
    hasPayload: true,
    deliveredAt: state === 'delivered' ? at : null,
    deadAt: state === 'dead' ? at : null,
    ...extra,
  };
}

/** The refusal `run` throws: exit 1 (refused or not found, not bad usage), with its one-line message. */
const refused = (run: () => unknown): string | undefined => {
  try {
    run();
  } catch (error) {
    return error instanceof CliError && error.exitCode === ExitCode.failed ? error.message : undefined;
  }
  return undefined;
};

const leased = { inFlight: true, leasedUntil: new Date('2026-12-03T10:00:35Z') };

describe('webhooks:retry plan', () => {
  it('retries named dead and pending deliveries', () => {
    const rows = [row('a', 'dead'), row('b', 'pending')];
    expect(planRetry(rows, { messageIds: ['a', 'b'], redeliver: false })).toEqual({ change: rows, skipped: [] });
  });

  it('changes nothing when one named id is unknown, delivered or in flight', () => {
    const named =
      (ids: string[], rows: DeliveryRecord[], redeliver = false) =>
      () =>
        planRetry(rows, { messageIds: ids, redeliver });
    expect(refused(named(['a', 'x', 'y'], [row('a', 'dead')]))).toBe('no webhook delivery x, y (see webhooks:list); nothing changed');
    expect(refused(named(['a', 'b'], [row('a', 'dead'), row('b', 'delivered')]))).toBe(
      'refused, nothing retried: b: already delivered at 2026-12-03T10:00:00.000Z (HTTP 204): a retry would POST it again; ' +
        'give --redeliver to send it anyway (same webhook-id: a receiver that still remembers it drops it as a duplicate)',
    );
    expect(refused(named(['a', 'b'], [row('a', 'dead'), row('b', 'pending', leased)]))).toBe(
      'refused, nothing retried: b: in flight: a dispatcher is POSTing it (leased until 2026-12-03T10:00:35.000Z); ' +
        'try again once that attempt has settled',
    );
  });

  it('sends a delivered one again only with --redeliver, and only when its body was kept', () => {
    const delivered = row('b', 'delivered');
    expect(planRetry([delivered], { messageIds: ['b'], redeliver: true }).change).toEqual([delivered]);
    expect(refused(() => planRetry([row('c', 'delivered', { hasPayload: false })], { messageIds: ['c'], redeliver: true }))).toMatch(
      /c: no body kept to send/,
    );
  });

  it('with --all-dead, skips and names what it must not touch instead of refusing the rest', () => {
    const rows = [row('a', 'dead'), row('b', 'dead', leased)];
    expect(planRetry(rows, { allDead: true })).toEqual({
      change: [rows[0]],
      skipped: [{ messageId: 'b', reason: expect.stringMatching(/^in flight/) }],
    });
    expect(planRetry([], { allDead: true })).toEqual({ change: [], skipped: [] });
  });
});

describe('webhooks:dead-letter plan', () => {
  it('gives up pending deliveries not in flight, all or nothing', () => {
    const rows = [row('a', 'pending'), row('b', 'pending', { leasedUntil: new Date('2026-12-03T09:00:00Z') })];
    expect(planDeadLetter(rows, ['a', 'b'])).toEqual({ change: rows, skipped: [] });
    expect(refused(() => planDeadLetter([row('a', 'pending'), row('b', 'delivered')], ['a', 'b']))).toBe(
      'refused, nothing dead-lettered: b: already delivered at 2026-12-03T10:00:00.000Z: nothing to give up',
    );
    expect(refused(() => planDeadLetter([row('a', 'dead')], ['a']))).toBe(
      'refused, nothing dead-lettered: a: already dead since 2026-12-03T10:00:00.000Z',
    );
    expect(refused(() => planDeadLetter([row('a', 'pending', leased)], ['a']))).toMatch(/a: in flight/);
    expect(refused(() => planDeadLetter([], ['a']))).toMatch(/^no webhook delivery a/);
  });
});
