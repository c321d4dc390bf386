import fc from 'fast-check';
import { canonicalUuid, UUID_PATTERN } from './ids';

/** A UUID with each letter in a case of its own choosing. */
const spelt = fc
  .tuple(fc.uuid(), fc.array(fc.boolean(), { minLength: 36, maxLength: 36 }))
  .map(([id, upper]) => ({ id, text: [...id].map((char, i) => (upper[i] ? char.toUpperCase() : char)).join('') }));

describe('canonicalUuid', () => {
  it('maps every letter-case spelling of a UUID to one lower-case id', () => {
    fc.assert(
      fc.property(spelt, ({ id, text }) => {
        expect(canonicalUuid(text)).toBe(id);
        expect(canonicalUuid(canonicalUuid(text))).toBe(id);
      }),
    );
  });

  it('takes nothing but the 8-4-4-4-12 hex form', () => {
    const id = '0f8fad5b-d9cb-469f-a165-70867728950e';
    for (const text of [
      `{${id}}`,
      `urn:uuid:${id}`,
      id.replace(/-/g, ''),
      ` ${id}`,
      `${id} `,
      `${id}\n`,
      `${id.slice(0, 35)}g`,
      `${id}0`,
      id.slice(1),
      id.replace('0', '\uff10'), // FULLWIDTH DIGIT ZERO
      id.replace('f', '\u212a'), // KELVIN SIGN: an ignore-case regex in unicode mode would fold it to "k", still no hex digit
      '',
    ]) {
      expect({ text, canonical: canonicalUuid(text) }).toEqual({ text, canonical: undefined });
    }
    for (const value of [undefined, null, 42, { id }, [id]]) expect(canonicalUuid(value)).toBeUndefined();
  });

  it('has one pattern source that PostgreSQL and OpenAPI read as JavaScript does (no flags)', () => {
    expect(UUID_PATTERN.flags).toBe('');
    expect(UUID_PATTERN.source).not.toMatch(/\\[dDwWsS]|\(\?/);
  });
});
