import { CliError, ExitCode } from '../cli-error';
import { deadLetterSelection, parseMessageIds, parseOrder, parseReason, parseState, parseTenant, retrySelection } from './webhook-options';

const ID = '0f8fad5b-d9cb-469f-a165-70867728950e';
const OTHER = '7c9e6679-7425-40de-944b-e07fc1f90ae7';

/** The one-line message of the bad-usage error `run` throws, or undefined when it throws none (or another). */
const usage = (run: () => unknown): string | undefined => {
  try {
    run();
  } catch (error) {
    return error instanceof CliError && error.exitCode === ExitCode.usage ? error.message : undefined;
  }
  return undefined;
};

describe('webhooks options', () => {
  it('reads a state, an order id in any case, a tenant and a reason; refuses anything else as bad usage', () => {
    expect(parseState('dead')).toBe('dead');
    expect(usage(() => parseState('failed'))).toBe('--state must be one of pending, delivered, dead, not "failed"');
    expect(parseOrder(ID.toUpperCase())).toBe(ID);
    expect(usage(() => parseOrder(`{${ID}}`))).toMatch(/--order must be an order id/);
    expect(parseTenant('acme-1.eu_x')).toBe('acme-1.eu_x');
    for (const bad of ['', 'a b', 'x'.repeat(65), "acme'"]) expect(usage(() => parseTenant(bad))).toMatch(/--tenant must be/);
    expect(parseReason('  receiver retired the endpoint ')).toBe('receiver retired the endpoint');
    for (const bad of ['', '   ', 'x'.repeat(501)]) expect(usage(() => parseReason(bad))).toBe('--reason must be 1-500 characters');
  });

  it('takes message-ids in any letter case, each once, and names those that are not UUIDs', () => {
    expect(parseMessageIds([ID.toUpperCase(), ID, OTHER])).toEqual([ID, OTHER]);
    expect(usage(() => parseMessageIds([ID, 'abc', '42']))).toBe('not a message-id (UUID): abc, 42');
  });

  it('retries named ids or every dead one, never both and never neither', () => {
    expect(retrySelection([ID], {})).toEqual({ messageIds: [ID], redeliver: false });
    expect(retrySelection([ID], { redeliver: true })).toEqual({ messageIds: [ID], redeliver: true });
    expect(retrySelection([], { allDead: true })).toEqual({ allDead: true, tenant: undefined });
    expect(retrySelection([], { allDead: true, tenant: 'acme' })).toEqual({ allDead: true, tenant: 'acme' });
    expect(usage(() => retrySelection([ID], { allDead: true }))).toMatch(/not both/);
    expect(usage(() => retrySelection([], {}))).toMatch(/or give --all-dead/);
    expect(usage(() => retrySelection([ID], { tenant: 'acme' }))).toMatch(/--tenant narrows --all-dead/);
    expect(usage(() => retrySelection([], { allDead: true, redeliver: true }))).toMatch(/--redeliver applies to named message-ids only/);
    expect(usage(() => retrySelection(['nope'], {}))).toMatch(/not a message-id/);
  });

  it('dead-letters named ids only, and only with a reason', () => {
    expect(deadLetterSelection([ID], { reason: 'gone' })).toEqual({ messageIds: [ID], reason: 'gone' });
    expect(usage(() => deadLetterSelection([], { reason: 'gone' }))).toMatch(/name the message-ids/);
    expect(usage(() => deadLetterSelection([ID], {}))).toMatch(/--reason <text> is required/);
  });
});
