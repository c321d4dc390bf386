import fc from 'fast-check';
import { firstUnacceptableText, nestsDeeperThan } from './body-rules';

describe('nestsDeeperThan', () => {
  const depth = (json: string) => (nestsDeeperThan(Buffer.from(json), 2) ? 'deeper than 2' : 'within 2');

  it.each([
    ['{"a":1}', 'within 2'],
    ['{"a":[1]}', 'within 2'],
    ['{"a":[[1]]}', 'deeper than 2'],
    ['{"a":"[[[[{{{{"}', 'within 2'],
    ['{"a":"\\"[[[["}', 'within 2'],
    ['[{"b":{}}]', 'deeper than 2'],
  ])('%s is %s', (json, expected) => expect(depth(json)).toBe(expected));

  it('agrees with the depth of any JSON value', () => {
    const measure = (value: unknown): number =>
      typeof value === 'object' && value !== null ? 1 + Math.max(0, ...Object.values(value).map(measure)) : 0;
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), fc.integer({ min: 0, max: 6 }), (value, max) => {
        expect(nestsDeeperThan(Buffer.from(JSON.stringify(value)), max)).toBe(measure(value) > max);
      }),
    );
  });
});

describe('firstUnacceptableText', () => {
  it.each([
    [{ reason: 'fine 🚚 é' }, undefined],
    [{ reason: 'a\u0000b' }, 'reason'],
    [{ reason: 'x\ud800' }, 'reason'],
    [{ reason: '\udc00x' }, 'reason'],
    [{ reason: '\udc00\ud800' }, 'reason'],
    [{ 'a\u0000': 1 }, 'a\u0000'],
    [{ x: [1, { y: '\ud83d' }] }, 'x[1].y'],
  ])('%j -> %s', (body, expected) => expect(firstUnacceptableText(body)).toBe(expected));

  it('accepts every well-formed string without NUL', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (text) => {
        expect(firstUnacceptableText({ text: text.replaceAll('\u0000', '') })).toBeUndefined();
      }),
    );
  });
});
