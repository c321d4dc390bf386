import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { CURRENT_FINGERPRINT_VERSION, fingerprint, SemanticFields } from './fingerprint';

describe('fingerprint', () => {
  it('is the SHA-256 of the canonical JSON, with its version', () => {
    // echo -n '{"quantity":2,"sku":"A"}' | sha256sum
    expect(fingerprint({ sku: 'A', quantity: 2 })).toEqual({
      version: CURRENT_FINGERPRINT_VERSION,
      value: '7ebc12bb899a5a30bab5d5ddf5363631393c55424d3d8341d20d352d17136bf4',
    });
  });

  it('ignores key order and whitespace but not values or types', () => {
    const a = fingerprint({ sku: 'A', quantity: 2, customerRef: null });
    expect(fingerprint({ customerRef: null, quantity: 2, sku: 'A' })).toEqual(a);
    expect(fingerprint({ sku: 'A', quantity: 3, customerRef: null })).not.toEqual(a);
    expect(fingerprint({ sku: 'A', quantity: '2', customerRef: null })).not.toEqual(a);
    expect(fingerprint({ sku: 'A', quantity: 2 })).not.toEqual(a);
  });

  it('separates field boundaries (no concatenation ambiguity)', () => {
    expect(fingerprint({ a: 'x|y', b: 'z' })).not.toEqual(fingerprint({ a: 'x', b: 'y|z' }));
  });

  const fields = fc.dictionary(
    fc.string({ maxLength: 6 }),
    fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean(), fc.constant(null)),
    { maxKeys: 5 },
  );

  it('is equal exactly when the canonical fields are equal (property)', () => {
    fc.assert(
      fc.property(fields, fields, (a: SemanticFields, b: SemanticFields) => {
        const same = JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
        return (fingerprint(a).value === fingerprint(b).value) === same;
      }),
    );
  });

  // Two independent dictionaries are almost never equal: the pairs that must match are built here.
  it('is one for the same fields in any key order, and another once one value changes or a field is added (property)', () => {
    const reordered = fields.chain((a) =>
      fc.shuffledSubarray(Object.entries(a), { minLength: Object.keys(a).length }).map((e) => [a, e] as const),
    );
    fc.assert(
      fc.property(reordered, fc.string({ maxLength: 6 }), fc.integer(), ([a, entries], key, value) => {
        const same: SemanticFields = Object.fromEntries(entries);
        expect(fingerprint(same)).toEqual(fingerprint(a));
        const changed: SemanticFields = { ...a, [key]: a[key] === value ? value + 1 : value };
        expect(fingerprint(changed)).not.toEqual(fingerprint(a));
      }),
    );
  });

  it('v1 is the digest receipts were stored with: a streamed SHA-256 of the canonical JSON as UTF-8 (property)', () => {
    // Receipts committed before v1 was computed by crypto.hash() hold createHash()'s digests: an honest
    // retry must still match them, for any text a field may hold (lone surrogates too).
    const text = fc.string({ unit: 'binary', maxLength: 40 });
    const value = fc.oneof(text, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null));
    const fields = fc.dictionary(text, value, { maxKeys: 5 });
    fc.assert(
      fc.property(fields, (f: SemanticFields) => {
        const streamed = createHash('sha256').update(canonicalize(f)!, 'utf8').digest('hex');
        return fingerprint(f, 1).value === streamed;
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses an unknown version instead of guessing', () => {
    expect(() => fingerprint({ a: 1 }, 99)).toThrow(/unknown fingerprint version 99/);
  });
});

function sortKeys(fields: SemanticFields): [string, unknown][] {
  return Object.entries(fields).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
}
