import { randomBytes, randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { WebhookSigner } from './webhook-signer';

const secret = () => `whsec_${randomBytes(32).toString('base64')}`;

describe('WebhookSigner', () => {
  it('signs so that the Standard Webhooks reference verifier accepts the delivery', () => {
    const key = secret();
    const id = randomUUID();
    const body = JSON.stringify({ type: 'order.placed', timestamp: new Date().toISOString(), data: { orderId: id } });
    const headers = new WebhookSigner([key]).headers(id, body);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(headers['idempotency-key']).toBe(id);
    expect(new Webhook(key).verify(body, headers)).toEqual(JSON.parse(body));
  });

  it('carries one signature per secret during a rotation: a receiver with either one accepts', () => {
    const [current, previous] = [secret(), secret()];
    const body = '{"type":"order.cancelled"}';
    const headers = new WebhookSigner([current, previous]).headers('msg-1', body);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(() => new Webhook(current).verify(body, headers)).not.toThrow();
    expect(() => new Webhook(previous).verify(body, headers)).not.toThrow();
    expect(() => new Webhook(secret()).verify(body, headers)).toThrow('No matching signature');
  });

  it('signs the exact bytes: any change to the body is refused', () => {
    const key = secret();
    const headers = new WebhookSigner([key]).headers('msg-2', '{"a":1}');
    expect(() => new Webhook(key).verify('{"a": 1}', headers)).toThrow();
  });
});
