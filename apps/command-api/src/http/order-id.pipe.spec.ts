import { ArgumentMetadata, ParseUUIDPipe } from '@nestjs/common';
import fc from 'fast-check';
import { ProblemException } from '@app/platform';
import { orderIdPipe } from './order-id.pipe';

const param: ArgumentMetadata = { type: 'param', data: 'id', metatype: String };

/** What Nest's ParseUUIDPipe (version "all"), the pipe this one replaced, accepted: the contract must not narrow or widen. */
const nestAccepted = (text: string) => (ParseUUIDPipe as unknown as { uuidRegExps: Record<string, RegExp> }).uuidRegExps.all.test(text);

function outcome(text: string): string | 'refused' {
  try {
    return orderIdPipe.transform(text, param);
  } catch (error) {
    expect(error).toBeInstanceOf(ProblemException);
    expect((error as ProblemException).problem).toMatchObject({ status: 400, code: 'REQUEST.INVALID' });
    return 'refused';
  }
}

/** Near misses: UUIDs with their letters in random case, then a character inserted, removed or replaced, or none. */
const nearUuid = fc
  .tuple(
    fc.uuid(),
    fc.array(fc.boolean(), { minLength: 36, maxLength: 36 }),
    fc.nat(36),
    fc.constantFrom('', '-', '{', '}', ' ', '\n', 'g', 'G', '0', 'F', '\uff10', '\u212a', '\u017f', '%'),
    fc.constantFrom('keep', 'insert', 'replace', 'remove'),
  )
  .map(([id, upper, at, char, edit]) => {
    const text = [...id].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('');
    if (edit === 'insert') return text.slice(0, at) + char + text.slice(at);
    if (edit === 'replace') return text.slice(0, at) + char + text.slice(at + 1);
    if (edit === 'remove') return text.slice(0, at) + text.slice(at + 1);
    return text;
  });

describe('orderIdPipe', () => {
  it('accepts exactly what ParseUUIDPipe accepted, and hands on the lower-case id', () => {
    fc.assert(
      fc.property(fc.oneof(nearUuid, fc.string(), fc.string({ unit: 'grapheme' })), (text) => {
        const result = outcome(text);
        expect(result).toBe(nestAccepted(text) ? text.toLowerCase() : 'refused');
      }),
      { numRuns: 5_000 },
    );
  });

  it('refuses what is not a string at all', () => {
    for (const value of [undefined, null, 7, ['0f8fad5b-d9cb-469f-a165-70867728950e']]) {
      expect(() => orderIdPipe.transform(value, param)).toThrow(ProblemException);
    }
  });
});
