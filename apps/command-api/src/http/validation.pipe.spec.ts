import fc from 'fast-check';
import { cancelOrderRequest } from '../orders/cancel-order/cancel-order.request.dto';
import { createOrderRequest } from '../orders/create-order/create-order.request.dto';
import { strictBody } from './validation.pipe';

/** Characters as the OpenAPI document's minLength/maxLength count them (JSON Schema: code points, an emoji is one). */
const characters = (value: string) => [...value].length;

/** The `errors` of the 400 a body gets, or undefined when the pipe accepts it. */
function refusal(pipe: ReturnType<typeof strictBody>, body: unknown): { field: string }[] | undefined {
  try {
    pipe.transform(body, { type: 'body' });
    return undefined;
  } catch (error) {
    return (error as { getResponse(): { errors: { field: string }[] } }).getResponse().errors;
  }
}

// Any Unicode text, astral characters (two UTF-16 units each) included, up to 80 characters.
const text = fc.string({ unit: 'grapheme-composite', maxLength: 80 }).filter((value) => !value.includes('\u0000'));

describe('strictBody', () => {
  const create = strictBody(createOrderRequest);
  const cancel = strictBody(cancelOrderRequest);

  it('counts a text field in characters, as the document states its length', () => {
    fc.assert(
      fc.property(text, (customerRef) => {
        const ok = characters(customerRef) >= 1 && characters(customerRef) <= 64;
        expect(refusal(create, { sku: 'SKU-1', quantity: 1, customerRef })).toEqual(
          ok ? undefined : [expect.objectContaining({ field: 'customerRef' })],
        );
      }),
    );
    expect(refusal(create, { sku: 'SKU-1', quantity: 1, customerRef: '😀'.repeat(64) })).toBeUndefined();
    expect(refusal(create, { sku: 'SKU-1', quantity: 1, customerRef: '😀'.repeat(65) })).toEqual([
      expect.objectContaining({ field: 'customerRef' }),
    ]);
    expect(refusal(cancel, { reason: '😀'.repeat(200) })).toBeUndefined();
    expect(refusal(cancel, { reason: '😀'.repeat(201) })).toEqual([expect.objectContaining({ field: 'reason' })]);
  });

  it('refuses unknown fields one by one, __proto__ and constructor too, and coerces nothing', () => {
    const body = JSON.parse('{"sku":"SKU-1","quantity":"2","__proto__":{"x":1},"constructor":{},"extra":true}');
    expect(
      refusal(create, body)
        ?.map((e) => e.field)
        .sort(),
    ).toEqual(['__proto__', 'constructor', 'extra', 'quantity']);
    expect(refusal(create, { sku: 'SKU-1', quantity: 2, customerRef: null })).toBeUndefined();
    expect(create.transform({ sku: 'SKU-1', quantity: 2 }, { type: 'body' })).toEqual({ sku: 'SKU-1', quantity: 2 });
  });

  it('names each refused field once, however many of its rules a value breaks', () => {
    // A value may break several of a field's rules at once (2^53 is neither a safe integer nor at most
    // 10,000); the client gets one reason per field, the first rule broken, and the detail says it once.
    const anything = fc.oneof(fc.double(), fc.integer(), fc.string({ maxLength: 80 }), fc.constant(null), fc.boolean());
    fc.assert(
      fc.property(fc.record({ sku: anything, quantity: anything, customerRef: anything }, { requiredKeys: [] }), (body) => {
        const fields = (refusal(create, body) ?? []).map((e) => e.field);
        expect(fields).toEqual([...new Set(fields)]);
      }),
      { examples: [[{ sku: 'SKU-1', quantity: 2 ** 53 }], [{ sku: 'SKU-1', quantity: 10_000.5 }]] },
    );
  });
});
