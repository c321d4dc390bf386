import fc from 'fast-check';
import { canonicalTimestamp, isTimestamp } from './timestamps';

describe('isTimestamp', () => {
  it('takes what toISOString writes, for every instant from year 0000 to 9999', () => {
    fc.assert(
      fc.property(
        fc.date({ min: new Date('0000-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }),
        (date) => {
          expect(isTimestamp(date.toISOString())).toBe(true);
          expect(canonicalTimestamp(date.toISOString())).toBe(date.toISOString());
        },
      ),
    );
  });

  it.each([
    '2024-01-01T00:00:00Z',
    '2024-01-01T00:00:00.1Z',
    '2024-01-01T00:00:00.123456789Z',
    '2024-01-01T00:00:00.1234567890Z', // RFC 3339 bounds no fraction's digits
    '2024-01-01T01:30:00+01:30',
    '2024-01-01T00:00:00-00:00',
    '2024-02-29T23:59:59.999Z',
    '2000-02-29T00:00:00Z',
  ])('takes %s', (value) => {
    expect(isTimestamp(value)).toBe(true);
    expect(Date.parse(value)).not.toBeNaN();
  });

  it.each([
    '2024-01-01\u0000',
    '2024-01-01T00:00:00.000Z\u0000',
    '\u00002024-01-01T00:00:00.000Z',
    '2024-01-01T00:00:00\u0000.000Z',
    '2024-01-01T00:00:00.000Z\n',
    ' 2024-01-01T00:00:00.000Z',
    '2024-01-01T00:00:00.000Z\ud800',
    '2024-01-01',
    '2024-01-01T00:00:00',
    '2024-01-01 00:00:00Z',
    '2024-01-01t00:00:00z',
    '2024-01-01T00:00Z',
    '2024-01-01T00:00:00.Z',
    '2024-01-01T00:00:00+0100',
    '2024-01-01T00:00:00+24:00',
    '2024-01-01T00:00:00+01:60',
    '2024-02-30T00:00:00Z',
    '2023-02-29T00:00:00Z',
    '1900-02-29T00:00:00Z',
    '2024-04-31T00:00:00Z',
    '2024-00-01T00:00:00Z',
    '2024-13-01T00:00:00Z',
    '2024-01-00T00:00:00Z',
    '2024-01-01T24:00:00Z',
    '2024-01-01T23:60:00Z',
    '2024-12-31T23:59:60Z',
    '+002024-01-01T00:00:00Z',
    '２０２４-01-01T00:00:00Z',
    'Mon, 01 Jan 2024 00:00:00 GMT',
    '1',
    '',
  ])('refuses %j', (value) => {
    expect(isTimestamp(value)).toBe(false);
    expect(canonicalTimestamp(value)).toBeUndefined();
  });

  it('canonicalTimestamp writes UTC with milliseconds, and refuses what has no such form', () => {
    expect(canonicalTimestamp('2026-12-04T11:00:00+02:00')).toBe('2026-12-04T09:00:00.000Z');
    expect(canonicalTimestamp('2026-12-04T09:00:00.1234Z')).toBe('2026-12-04T09:00:00.123Z');
    expect(canonicalTimestamp('0000-01-01T00:00:00+01:00')).toBeUndefined();
    expect(canonicalTimestamp('9999-12-31T23:59:59-01:00')).toBeUndefined();
    for (const value of [undefined, null, 42, new Date()]) expect(canonicalTimestamp(value)).toBeUndefined();
  });
});
