import fc from 'fast-check';
import { Headers, orderEventContract, OrderEventTypes } from '@app/contracts';
import { InboxMessage, MalformedMessage } from './inbox-message';
import { readEvent } from './read-event';

const orderId = '0b5c6f0e-8d1f-4a57-9f55-4a8f1f0e2c11';
const placed = { orderId, tenantId: 't1', sku: 'SKU-1', quantity: 2, customerRef: null, placedAt: '2026-12-04T10:00:00.000Z' };

function message(type: string | undefined, payload: unknown, headers: Record<string, string> = {}): InboxMessage {
  return {
    topic: 'orders.order-events.v1',
    partition: 0,
    offset: '0',
    key: orderId,
    headers: { [Headers.tenantId]: 't1', ...(type ? { [Headers.eventType]: type } : {}), ...headers },
    value: typeof payload === 'string' ? payload : JSON.stringify(payload),
    messageId: '6f1d7a52-35a4-4d8e-9d4c-0f4fa1a3e0d1',
    eventType: type,
  };
}

describe('readEvent (the consumer kit reading a message against its contract)', () => {
  it('reads a known event, its id in canonical form', () => {
    const read = readEvent(message(OrderEventTypes.placed, { ...placed, orderId: orderId.toUpperCase() }), orderEventContract);
    expect(read).toMatchObject({ type: OrderEventTypes.placed, messageId: '6f1d7a52-35a4-4d8e-9d4c-0f4fa1a3e0d1', event: placed });
  });

  it('skips any type it does not know, and versions newer than it reads, whatever the payload', () => {
    fc.assert(
      fc.property(fc.string(), fc.anything(), (type, payload) => {
        fc.pre(!Object.hasOwn(orderEventContract.schemas, type));
        expect(readEvent(message(type, payload), orderEventContract)).toBeUndefined();
      }),
    );
    expect(readEvent(message(OrderEventTypes.placed, 'not json', { [Headers.eventVersion]: '2' }), orderEventContract)).toBeUndefined();
    expect(readEvent(message(undefined, placed), orderEventContract)).toBeUndefined();
    expect(readEvent(message('toString', placed), orderEventContract)).toBeUndefined();
  });

  it('calls a known event malformed when its payload is not JSON, fails the schema, or names another tenant', () => {
    const malformed = (m: InboxMessage) => () => readEvent(m, orderEventContract);
    expect(malformed(message(OrderEventTypes.placed, '{oops'))).toThrow(new MalformedMessage('payload is not JSON'));
    expect(malformed(message(OrderEventTypes.placed, { ...placed, quantity: 1.5 }))).toThrow(/payload is not a OrderPlaced: quantity/);
    expect(malformed(message(OrderEventTypes.placed, { ...placed, orderId: `{${orderId}}` }))).toThrow(/orderId must be a UUID/);
    expect(malformed(message(OrderEventTypes.placed, { ...placed, tenantId: 't2' }))).toThrow(/tenant t2 does not match/);
    fc.assert(
      fc.property(fc.anything(), (payload) => {
        fc.pre(typeof payload !== 'object' || payload === null || Array.isArray(payload));
        expect(malformed(message(OrderEventTypes.cancelled, payload))).toThrow(MalformedMessage);
      }),
    );
  });

  it('calls a known event malformed when its event-version header is not a version number', () => {
    // "abc" read as NaN, "0", "-3" and "1.5" as numbers not above the newest: each was applied as a version
    // the consumer understands, where no version of it says what such a payload means.
    const read = (version: string) => () =>
      readEvent(message(OrderEventTypes.placed, placed, { [Headers.eventVersion]: version }), orderEventContract);
    fc.assert(
      fc.property(fc.string(), (version) => {
        fc.pre(!/^[1-9][0-9]*$/.test(version));
        expect(read(version)).toThrow(new MalformedMessage(`event-version ${JSON.stringify(version)} is not a version number`));
      }),
      { examples: [['abc'], ['0'], ['-3'], ['1.5'], [''], [' 1'], ['01'], ['1e0'], ['0x1']] },
    );
    expect(read('1')()).toMatchObject({ type: OrderEventTypes.placed });
    expect(read('99')()).toBeUndefined();
  });
});
