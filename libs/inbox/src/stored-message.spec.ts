import fc from 'fast-check';
import { diagnosticText, fromStoredContent, MessageContent, StoredContent, toStoredContent } from './stored-message';

/** Text with NULs and percent signs (the escape) more often than chance would give. */
const text = fc.string({
  unit: fc.oneof(fc.constantFrom('\u0000', '%', '0', '2', '5'), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })),
});
const contents: fc.Arbitrary<MessageContent> = fc.record({
  key: fc.option(text, { nil: null }),
  payload: fc.option(text, { nil: null }),
  headers: fc.dictionary(text, text),
});

/** What PostgreSQL refuses: a NUL anywhere in text, `\u0000` anywhere in jsonb. */
function storable(stored: StoredContent): boolean {
  return ![stored.key ?? '', stored.payload ?? ''].some((t) => t.includes('\u0000')) && !JSON.stringify(stored.headers).includes('\\u0000');
}

describe('stored message content', () => {
  it('is always storable and reads back as it came', () => {
    fc.assert(
      fc.property(contents, (content) => {
        const stored = toStoredContent(content);
        expect(storable(stored)).toBe(true);
        // As the jsonb column gives it back.
        const read = fromStoredContent({ ...stored, headers: JSON.parse(JSON.stringify(stored.headers)) });
        expect(read).toEqual(content);
      }),
    );
  });

  it('is stored as it is when it holds no NUL, so rows recorded before the escaping read the same', () => {
    fc.assert(
      fc.property(contents, (content) => {
        fc.pre(![content.key ?? '', content.payload ?? '', ...Object.entries(content.headers).flat()].some((t) => t.includes('\u0000')));
        expect(toStoredContent(content)).toEqual(content);
        expect(fromStoredContent(content)).toEqual(content);
      }),
    );
  });

  it('escapes every string of a message with a NUL, and says so in its headers', () => {
    const stored = toStoredContent({
      key: 'k%',
      payload: '{"a":1}\u0000',
      headers: { 'x\u0000': '100%', headers: 'a plain header named headers' },
    });
    expect(stored).toEqual({
      key: 'k%25',
      payload: '{"a":1}%00',
      headers: { escaped: expect.any(String), headers: { 'x%00': '100%25', headers: 'a plain header named headers' } },
    });
    expect(fromStoredContent({ key: 'k%25', payload: null, headers: { headers: 'plain', escaped: 'plain' } })).toEqual({
      key: 'k%25',
      payload: null,
      headers: { headers: 'plain', escaped: 'plain' },
    });
  });

  it('diagnostic text keeps its length, each NUL as U+FFFD', () => {
    expect(diagnosticText('Order\u0000Placed\u0000')).toBe('Order\ufffdPlaced\ufffd');
    expect(diagnosticText(null)).toBeNull();
  });
});
