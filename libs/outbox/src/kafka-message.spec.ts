import fc from 'fast-check';
import { Headers } from '@app/contracts';
import { toKafkaMessage } from './kafka-message';
import { OutboxRow } from './relay-store';

const ours = [Headers.messageId, Headers.eventType, Headers.eventVersion, Headers.tenantId, Headers.aggregateId, Headers.occurredAt];
/** Header names a row may carry: the trace context, anything else, and ours (which must not win). */
const headerName = fc.oneof(
  fc.constantFrom(Headers.traceparent, '__proto__', 'constructor', ...ours),
  fc.string({ minLength: 1, maxLength: 12 }),
);

describe('toKafkaMessage', () => {
  it("carries the row's headers and sets every one of ours from the row's columns, whatever the row's headers say", () => {
    fc.assert(
      fc.property(fc.dictionary(headerName, fc.string({ maxLength: 20 })), fc.uuid(), fc.uuid(), (rowHeaders, id, orderId) => {
        const row: OutboxRow = {
          id,
          sequence: '1',
          topic: 'orders.events',
          message_key: orderId,
          event_type: 'OrderPlaced',
          event_version: 2,
          tenant_id: 'tenant-a',
          payload: { orderId },
          payload_json: `{"orderId": "${orderId}"}`,
          headers: rowHeaders,
          created_at: new Date('2026-12-05T20:00:00.123Z'),
        };
        const message = toKafkaMessage(row);
        expect(message.headers).toEqual({
          ...rowHeaders,
          [Headers.messageId]: id,
          [Headers.eventType]: 'OrderPlaced',
          [Headers.eventVersion]: '2',
          [Headers.tenantId]: 'tenant-a',
          [Headers.aggregateId]: orderId,
          [Headers.occurredAt]: '2026-12-05T20:00:00.123Z',
        });
        expect(message).toMatchObject({ key: orderId, value: row.payload_json });
        expect(rowHeaders).not.toBe(message.headers); // the row's object is left as it was
      }),
    );
  });

  it('serialises the payload when it was not read as text', () => {
    const row = { id: 'x', message_key: 'k', event_type: 'T', event_version: 1, tenant_id: 't', payload: { a: [1, 'b'] } };
    const message = toKafkaMessage({ ...row, sequence: '1', topic: 't', headers: {}, created_at: new Date(0) });
    expect(message.value).toBe('{"a":[1,"b"]}');
  });
});
