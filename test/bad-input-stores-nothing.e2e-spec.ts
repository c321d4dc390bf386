import { ApiClientSession, commandApiFixture } from './support/command-api';
import { http } from './support/http';
import { rawHttp } from './support/raw-http';

/**
 * The table of bad inputs: every one is refused with its documented 4xx as problem+json, and
 * none of them stores an order, a receipt or an outbox row. Where the Idempotency-Key itself was
 * valid, the same key then still works for a valid request: the refused request never used it.
 */

const PROBLEM_JSON = /^application\/problem\+json/;
const INVALID = '/problems/invalid-request';
const TOO_LARGE = '/problems/request-too-large';
const UNSUPPORTED = '/problems/unsupported-media-type';
const MAX_BODY_BYTES = 16 * 1024;

const validCreate = { sku: 'SKU-1', quantity: 2 };
const validCancel = { reason: 'customer changed their mind' };

/** `{"sku":"SKU-1","quantity":2,"customerRef":"aaa…"}` of exactly `bytes` bytes. */
function createBodyOfSize(bytes: number): string {
  const empty = JSON.stringify({ ...validCreate, customerRef: '' });
  return JSON.stringify({ ...validCreate, customerRef: 'a'.repeat(bytes - Buffer.byteLength(empty)) });
}

interface BadInput {
  /** The Idempotency-Key header: omitted when null; a fresh valid key when undefined. */
  key?: string | null;
  /** The Content-Type header: omitted when null; application/json when undefined. */
  contentType?: string | null;
  body: unknown;
  status: number;
  type: string;
  /** When set, the problem carries `errors` naming exactly these fields. */
  fields?: string[];
  /** When set, the problem's `detail` says this (what a caller reads to mend the request). */
  detail?: RegExp;
  /** Further request headers. */
  headers?: Record<string, string>;
}

/** Sends `body` as it is (a string) or as JSON, with the row's key and content type. */
function send(url: string, apiKey: string, row: BadInput, key: string | null) {
  const headers: Record<string, string> = { Authorization: `Bearer ${apiKey}`, ...row.headers };
  if (key !== null) headers['Idempotency-Key'] = key;
  const contentType = row.contentType === undefined ? 'application/json' : row.contentType;
  if (contentType !== null) headers['Content-Type'] = contentType;
  const body = typeof row.body === 'string' ? row.body : JSON.stringify(row.body);
  return http(url, { method: 'POST', headers, body });
}

// Keys Node's HTTP client will send. Node refuses (ERR_INVALID_CHAR) to put any other control
// character (0x00-0x08, 0x0A-0x1F, 0x7F) or any character above U+00FF into a header value, so those
// are sent over a raw socket in the last test of this file. Leading and trailing spaces or tabs are
// optional whitespace around a header value (RFC 9110 §5.5): the server never sees them, so a space
// is only testable inside the key.
const badKeys: [string, BadInput][] = [
  ['no Idempotency-Key header', { key: null, body: validCreate, status: 400, type: INVALID }],
  ['an empty Idempotency-Key', { key: '', body: validCreate, status: 400, type: INVALID }],
  ['a 256-character Idempotency-Key', { key: 'k'.repeat(256), body: validCreate, status: 400, type: INVALID }],
  ['an Idempotency-Key containing a space', { key: 'intent a', body: validCreate, status: 400, type: INVALID }],
  ['an Idempotency-Key containing a tab (a control character)', { key: 'intent\ta', body: validCreate, status: 400, type: INVALID }],
  ['a non-ASCII Idempotency-Key (é, sent as the latin-1 byte 0xE9)', { key: 'café', body: validCreate, status: 400, type: INVALID }],
];

const badCreateBodies: [string, BadInput][] = [
  ['a body that is not JSON', { body: 'sku=SKU-1&quantity=2', status: 400, type: INVALID, detail: /not valid JSON/ }],
  ['malformed JSON', { body: '{"sku":"SKU-1","quantity":2', status: 400, type: INVALID, detail: /not valid JSON/ }],
  // Valid JSON, but not an object: said so, not "not valid JSON".
  ['a JSON array', { body: [validCreate], status: 400, type: INVALID, detail: /must be a JSON object/ }],
  ['JSON null', { body: 'null', status: 400, type: INVALID, detail: /must be a JSON object/ }],
  ['a JSON string', { body: '"SKU-1"', status: 400, type: INVALID, detail: /must be a JSON object/ }],
  ['a JSON number', { body: '2', status: 400, type: INVALID, detail: /must be a JSON object/ }],
  [
    'Content-Encoding gzip on a body that is not gzip',
    { headers: { 'Content-Encoding': 'gzip' }, body: validCreate, status: 400, type: INVALID, detail: /Content-Encoding gzip/ },
  ],
  [
    'an unsupported Content-Encoding',
    { headers: { 'Content-Encoding': 'compress' }, body: validCreate, status: 415, type: UNSUPPORTED, detail: /Content-Encoding/ },
  ],
  ['an empty body', { body: '', status: 400, type: INVALID, fields: ['sku', 'quantity'] }],
  ['Content-Type text/plain', { contentType: 'text/plain', body: JSON.stringify(validCreate), status: 415, type: UNSUPPORTED }],
  ['no Content-Type', { contentType: null, body: JSON.stringify(validCreate), status: 415, type: UNSUPPORTED }],
  [
    'a form-encoded body',
    { contentType: 'application/x-www-form-urlencoded', body: 'sku=SKU-1&quantity=2', status: 415, type: UNSUPPORTED },
  ],
  [
    'JSON in an unsupported charset',
    { contentType: 'application/json; charset=latin1', body: validCreate, status: 415, type: UNSUPPORTED },
  ],
  ['quantity as a string "2"', { body: { sku: 'SKU-1', quantity: '2' }, status: 400, type: INVALID, fields: ['quantity'] }],
  ['quantity 2.5', { body: { sku: 'SKU-1', quantity: 2.5 }, status: 400, type: INVALID, fields: ['quantity'] }],
  ['quantity 0', { body: { sku: 'SKU-1', quantity: 0 }, status: 400, type: INVALID, fields: ['quantity'] }],
  ['a negative quantity', { body: { sku: 'SKU-1', quantity: -1 }, status: 400, type: INVALID, fields: ['quantity'] }],
  ['quantity 10001', { body: { sku: 'SKU-1', quantity: 10001 }, status: 400, type: INVALID, fields: ['quantity'] }],
  ['quantity true', { body: { sku: 'SKU-1', quantity: true }, status: 400, type: INVALID, fields: ['quantity'] }],
  ['no quantity', { body: { sku: 'SKU-1' }, status: 400, type: INVALID, fields: ['quantity'] }],
  ['sku of 65 characters', { body: { sku: 'S'.repeat(65), quantity: 2 }, status: 400, type: INVALID, fields: ['sku'] }],
  ['an empty sku', { body: { sku: '', quantity: 2 }, status: 400, type: INVALID, fields: ['sku'] }],
  ['sku with a space', { body: { sku: 'SKU 1', quantity: 2 }, status: 400, type: INVALID, fields: ['sku'] }],
  ['sku with a slash', { body: { sku: 'SKU/1', quantity: 2 }, status: 400, type: INVALID, fields: ['sku'] }],
  ['sku as a number', { body: { sku: 1, quantity: 2 }, status: 400, type: INVALID, fields: ['sku'] }],
  ['an empty customerRef', { body: { ...validCreate, customerRef: '' }, status: 400, type: INVALID, fields: ['customerRef'] }],
  [
    'customerRef of 65 characters',
    { body: { ...validCreate, customerRef: 'r'.repeat(65) }, status: 400, type: INVALID, fields: ['customerRef'] },
  ],
  ['customerRef as a number', { body: { ...validCreate, customerRef: 7 }, status: 400, type: INVALID, fields: ['customerRef'] }],
  ['an unknown field', { body: { ...validCreate, priority: 'high' }, status: 400, type: INVALID, fields: ['priority'] }],
  [
    'a tenantId field (the tenant comes from the credential only)',
    { body: { ...validCreate, tenantId: 't-other' }, status: 400, type: INVALID, fields: ['tenantId'] },
  ],
  [
    'an unknown field named "constructor"',
    { body: '{"sku":"SKU-1","quantity":2,"constructor":{}}', status: 400, type: INVALID, fields: ['constructor'] },
  ],
  [
    'an unknown field named "__proto__"',
    { body: '{"sku":"SKU-1","quantity":2,"__proto__":{"x":1}}', status: 400, type: INVALID, fields: ['__proto__'] },
  ],
  [`a body of ${MAX_BODY_BYTES + 1} bytes`, { body: createBodyOfSize(MAX_BODY_BYTES + 1), status: 413, type: TOO_LARGE }],
  [
    `a body of ${MAX_BODY_BYTES} bytes is read, then judged by its fields`,
    { body: createBodyOfSize(MAX_BODY_BYTES), status: 400, type: INVALID, fields: ['customerRef'] },
  ],
  ['a 1 MiB body', { body: JSON.stringify({ pad: 'x'.repeat(1024 * 1024) }), status: 413, type: TOO_LARGE }],
];

const badCancels: [string, BadInput & { orderId?: string }][] = [
  ['no Idempotency-Key header', { key: null, body: validCancel, status: 400, type: INVALID }],
  ['a 256-character Idempotency-Key', { key: 'k'.repeat(256), body: validCancel, status: 400, type: INVALID }],
  ['an Idempotency-Key containing a space', { key: 'cancel it', body: validCancel, status: 400, type: INVALID }],
  ['a non-UUID order id', { orderId: 'order-1', body: validCancel, status: 400, type: INVALID }],
  ['an almost-UUID order id', { orderId: '0000000-0000-0000-0000-000000000000', body: validCancel, status: 400, type: INVALID }],
  ['an empty reason', { body: { reason: '' }, status: 400, type: INVALID, fields: ['reason'] }],
  ['a reason of 201 characters', { body: { reason: 'r'.repeat(201) }, status: 400, type: INVALID, fields: ['reason'] }],
  ['a reason as a number', { body: { reason: 42 }, status: 400, type: INVALID, fields: ['reason'] }],
  ['no reason', { body: {}, status: 400, type: INVALID, fields: ['reason'] }],
  ['an unknown field', { body: { ...validCancel, force: true }, status: 400, type: INVALID, fields: ['force'] }],
  [
    'an unknown field named "constructor"',
    { body: '{"reason":"changed","constructor":{}}', status: 400, type: INVALID, fields: ['constructor'] },
  ],
  ['a body that is not JSON', { body: 'reason=changed', status: 400, type: INVALID }],
  ['a JSON array', { body: [validCancel], status: 400, type: INVALID, detail: /must be a JSON object/ }],
  ['JSON null', { body: 'null', status: 400, type: INVALID, detail: /must be a JSON object/ }],
  ['Content-Type text/plain', { contentType: 'text/plain', body: JSON.stringify(validCancel), status: 415, type: UNSUPPORTED }],
  [`a body over ${MAX_BODY_BYTES} bytes`, { body: { reason: 'r'.repeat(MAX_BODY_BYTES) }, status: 413, type: TOO_LARGE }],
];

describe('bad input is refused and stores nothing', () => {
  const suite = commandApiFixture();
  const { db } = suite;

  function expectProblem(response: Awaited<ReturnType<typeof http>>, row: BadInput) {
    expect({ status: response.status, contentType: response.headers['content-type'] }).toEqual({
      status: row.status,
      contentType: expect.stringMatching(PROBLEM_JSON),
    });
    expect(response.body).toMatchObject({ type: row.type, status: row.status, title: expect.any(String) });
    expect(response.body.code).toMatch(/^REQUEST\./);
    if (row.detail) expect(response.body.detail).toMatch(row.detail);
    if (row.fields) {
      expect(response.body.errors).toEqual(expect.any(Array));
      expect(new Set(response.body.errors.map((e: { field: string }) => e.field))).toEqual(new Set(row.fields));
    }
    // A refused request was never executed: it does not look like one.
    for (const header of ['location', 'idempotency-expires', 'idempotent-replayed']) {
      expect(response.headers[header]).toBeUndefined();
    }
  }

  describe('POST /v1/orders with a bad Idempotency-Key', () => {
    it.each(badKeys)('%s -> 400 and nothing stored', async (_, row) => {
      const { tenantId, apiKey } = await db.tenant();
      const response = await send(`${suite.api.url}/v1/orders`, apiKey, row, row.key!);
      expectProblem(response, row);
      expect(response.body.detail).toMatch(/Idempotency-Key/);
      expect(await db.counts(tenantId)).toEqual({ orders: 0, receipts: 0, outbox: 0 });
    });
  });

  describe('POST /v1/orders with a bad body (and a valid key)', () => {
    it.each(badCreateBodies)('%s -> documented 4xx, nothing stored, and the same key then works', async (_, row) => {
      const { tenantId, apiKey } = await db.tenant();
      const client = new ApiClientSession(suite.api.url, apiKey);
      const key = 'intent-after-a-bad-body';

      const refused = await send(`${suite.api.url}/v1/orders`, apiKey, row, key);
      expectProblem(refused, row);
      expect(await db.counts(tenantId)).toEqual({ orders: 0, receipts: 0, outbox: 0 });
      expect((await client.get(`/v1/idempotency-receipts/orders.create/${key}`)).status).toBe(404);

      const valid = await client.createOrder(key, validCreate);
      expect(valid.status).toBe(201);
      expect(valid.headers['idempotent-replayed']).toBeUndefined();
      expect(valid.body).toMatchObject({ ...validCreate, status: 'placed' });
      expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
    });
  });

  describe('POST /v1/orders/{id}/cancel with bad input', () => {
    it.each(badCancels)('%s -> documented 4xx, the order untouched, and the same key then works', async (_, row) => {
      const { tenantId, apiKey } = await db.tenant();
      const client = new ApiClientSession(suite.api.url, apiKey);
      const placed = await client.createOrder('place-it', validCreate);
      expect(placed.status).toBe(201);
      const orderId: string = placed.body.id;
      const before = await db.counts(tenantId);
      expect(before).toEqual({ orders: 1, receipts: 1, outbox: 1 });

      const key = row.key === undefined ? 'cancel-after-a-bad-request' : row.key;
      const refused = await send(`${suite.api.url}/v1/orders/${row.orderId ?? orderId}/cancel`, apiKey, row, key);
      expectProblem(refused, row);
      expect(await db.counts(tenantId)).toEqual(before);
      expect((await client.get(`/v1/orders/${orderId}`)).body).toMatchObject({ status: 'placed', cancelledAt: null });

      if (key !== null && /^[\x21-\x7E]{1,255}$/.test(key)) {
        // The key was valid, so prove it stayed unused: a valid cancel with it executes (not a replay).
        const valid = await client.cancelOrder(orderId, key, validCancel);
        expect(valid.status).toBe(200);
        expect(valid.headers['idempotent-replayed']).toBeUndefined();
        expect(valid.body).toMatchObject({ id: orderId, status: 'cancelled', cancelReason: validCancel.reason });
        expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 2, outbox: 2 });
      }
    });
  });

  it('spaces around a key are HTTP whitespace, not part of it: " k " is the key "k"', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const first = await client.createOrder('k', validCreate);
    const padded = await client.createOrder(' k\t', validCreate);
    expect(first.status).toBe(201);
    expect(padded.status).toBe(201);
    expect(padded.headers['idempotent-replayed']).toBe('true');
    expect(padded.body.id).toBe(first.body.id);
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });

  it('control characters Node will not send, and a key sent twice, over a raw socket: 400, nothing stored', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const body = JSON.stringify(validCreate);
    const head = [
      'POST /v1/orders HTTP/1.1',
      'Host: 127.0.0.1',
      `Authorization: Bearer ${apiKey}`,
      'Content-Type: application/json',
      `Content-Length: ${Buffer.byteLength(body)}`,
      'Connection: close',
    ];
    const sendRaw = (...keyLines: string[]) => rawHttp(suite.api.url, [`${[...head, ...keyLines].join('\r\n')}\r\n\r\n${body}`]);
    // Node's HTTP parser refuses NUL, SOH, ESC and DEL in a header value itself, before the app runs;
    // the platform answers that as problem+json too. The app's own 0x21-0x7E rule is what catches the
    // tab, the space and non-ASCII above.
    for (const control of ['\x00', '\x01', '\x1b', '\x7f']) {
      const reply = await sendRaw(`Idempotency-Key: intent${control}a`);
      expect(reply.statusLine).toBe('HTTP/1.1 400 Bad Request');
      expect(reply.head).toMatch(/^content-type: application\/problem\+json/im);
      expect(JSON.parse(reply.body)).toMatchObject({ type: '/problems/bad-request', status: 400 });
    }
    // The same header twice is joined as "dup-1, dup-1" (a space): refused by the app, as problem+json.
    const twice = await sendRaw('Idempotency-Key: dup-1', 'Idempotency-Key: dup-1');
    expect(twice.statusLine).toBe('HTTP/1.1 400 Bad Request');
    expect(twice.head).toMatch(/^content-type: application\/problem\+json/im);
    expect(JSON.parse(twice.body)).toMatchObject({ type: INVALID, status: 400 });

    expect(await db.counts(tenantId)).toEqual({ orders: 0, receipts: 0, outbox: 0 });
    // dup-1 itself stayed unused.
    const valid = await new ApiClientSession(suite.api.url, apiKey).createOrder('dup-1', validCreate);
    expect(valid.status).toBe(201);
    expect(valid.headers['idempotent-replayed']).toBeUndefined();
  });
});
