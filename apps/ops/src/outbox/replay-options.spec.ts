import { CliError, ExitCode } from '../cli-error';
import { batchSize, checkRange, parseAggregate, parseBound, parseRate, parseReplayId } from './replay-options';
import { Pacer } from './replay-pacer';

const usage = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    return error instanceof CliError && error.exitCode === ExitCode.usage;
  }
  return false;
};

describe('outbox:replay options', () => {
  it('reads a range end as a sequence or as an ISO time that names its offset', () => {
    expect(parseBound('--from', '42')).toEqual({ sequence: '42' });
    expect(parseBound('--from', '007')).toEqual({ sequence: '7' });
    expect(parseBound('--from', '2025-01-31')).toEqual({ time: new Date('2025-01-31T00:00:00Z') });
    expect(parseBound('--from', '2025-01-31T14:00:00+02:00')).toEqual({ time: new Date('2025-01-31T12:00:00Z') });
    expect(parseBound('--to', '2025-01-31T14:00:00.123Z')).toEqual({ time: new Date('2025-01-31T14:00:00.123Z') });
    for (const bad of ['yesterday', '', '-1', '1.5', '2025-01-31T14:00:00', '2025-13-40', '2025-02-30T00:00:00Z x']) {
      expect(usage(() => parseBound('--from', bad))).toBe(true);
    }
  });

  it('reads an order id in any letter case as the one key its events carry; other keys as typed', () => {
    const id = '0f8fad5b-d9cb-469f-a165-70867728950e';
    for (const typed of [id, id.toUpperCase(), '0F8FAD5B-d9cb-469F-A165-70867728950E']) {
      expect(parseAggregate(typed)).toBe(id);
      expect(parseReplayId(typed)).toBe(id);
    }
    expect(parseAggregate('Customer-7')).toBe('Customer-7');
    expect(usage(() => parseAggregate(' '))).toBe(true);
    expect(usage(() => parseReplayId(`{${id}}`))).toBe(true);
  });

  it('refuses a range that ends before it starts, when both ends are of one kind', () => {
    expect(usage(() => checkRange({ sequence: '10' }, { sequence: '9' }))).toBe(true);
    expect(usage(() => checkRange({ time: new Date(2_000) }, { time: new Date(1_000) }))).toBe(true);
    expect(() => checkRange({ sequence: '10' }, { sequence: '10' })).not.toThrow();
    expect(() => checkRange({ time: new Date(2_000) }, { sequence: '1' })).not.toThrow();
    expect(() => checkRange({ sequence: '10' }, undefined)).not.toThrow();
  });

  it('takes a rate above zero and sizes batches to about one second of it', () => {
    expect(parseRate('2.5')).toBe(2.5);
    for (const bad of ['0', '-1', 'fast', '', '1e3', 'Infinity']) expect(usage(() => parseRate(bad))).toBe(true);
    expect(batchSize(undefined)).toBe(500);
    expect(batchSize(0.2)).toBe(1);
    expect(batchSize(10)).toBe(10);
    expect(batchSize(10_000)).toBe(500);
  });

  it('spaces batches by their size over the rate', async () => {
    let now = 0;
    const pacer = new Pacer(10, () => now);
    await pacer.before(10); // the first batch goes at once
    now = 400;
    const waiting = pacer.before(5);
    let done = false;
    void waiting.then(() => (done = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(done).toBe(false); // 10 messages at 10/s book one second
    now = 1_000;
    await waiting;
    pacer.interrupt();
  });
});
