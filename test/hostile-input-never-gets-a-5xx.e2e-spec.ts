import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { http, HttpResult } from './support/http';
import { searchSettings } from './support/search';

/**
 * Any input the service cannot accept is a 4xx, never a 5xx (DESIGN.md): first the inputs that once
 * reached the database or the validator and came back as 500, then random requests — bodies, keys,
 * ids, credentials, content types and encodings, methods, routes, Expect headers — against the real
 * API and PostgreSQL. For every answer: never a 5xx or a reset connection, every error is problem+json
 * of a type the OpenAPI document declares (`x-problem-types`, which clients type errors by), a refused
 * request stores no receipt and no order, and no answer shows another tenant's data.
 *
 * 300 random requests in `npm test`, 5,000 in `npm run test:faults`.
 * Reproduce a failure with the seed and path fast-check prints: FC_SEED=… FC_PATH=… npx jest test/hostile-input
 */

const PROBLEM_JSON = /^application\/problem\+json/;

/** Percent-encodes every UTF-8 byte outside the unreserved set, but leaves `%` as it is (to send broken escapes). */
function pathSegment(text: string): string {
  return [...Buffer.from(text, 'utf8')]
    .map((byte) =>
      /[A-Za-z0-9._~%-]/.test(String.fromCharCode(byte))
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`,
    )
    .join('');
}

/** `depth` levels of nested arrays around `inner`, as JSON text (JSON.stringify would recurse as deep). */
function nested(depth: number, inner = '1'): string {
  return '['.repeat(depth) + inner + ']'.repeat(depth);
}

describe('hostile input never gets a 5xx', () => {
  const fixture = commandApiFixture();
  const db = fixture.db;
  const api = {
    get url() {
      return fixture.api.url;
    },
  };

  function expectProblem(result: HttpResult, status: number) {
    expect({ status: result.status, contentType: result.headers['content-type'] }).toEqual({
      status,
      contentType: expect.stringMatching(PROBLEM_JSON),
    });
  }

  async function post(apiKey: string, path: string, body: string, key = `k-${randomUUID()}`): Promise<HttpResult> {
    return http(`${api.url}${path}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${apiKey}`, 'Idempotency-Key': key, 'Content-Type': 'application/json' },
      body,
    });
  }

  describe('each input that once came back as 500 is a 400 problem and stores nothing', () => {
    const cases: [string, (orderId: string) => [path: string, body: string]][] = [
      ['a deeply nested value in an unknown field', () => ['/v1/orders', `{"sku":"SKU-1","quantity":1,"x":${nested(5_000)}}`]],
      ['a deeply nested value in a known field', () => ['/v1/orders', `{"sku":${nested(5_000, '"a"')},"quantity":1}`]],
      [
        'a deeply nested object in a known field',
        () => ['/v1/orders', `{"sku":"SKU-1","quantity":1,"customerRef":${'{"a":'.repeat(2_000)}1${'}'.repeat(2_000)}}`],
      ],
      ['a deeply nested cancel reason', (id) => [`/v1/orders/${id}/cancel`, `{"reason":${nested(5_000)}}`]],
      ['a NUL in customerRef', () => ['/v1/orders', '{"sku":"SKU-1","quantity":1,"customerRef":"ref\\u0000x"}']],
      ['a NUL in an unknown field', () => ['/v1/orders', '{"sku":"SKU-1","quantity":1,"note":"\\u0000"}']],
      ['a NUL in a field name', () => ['/v1/orders', '{"sku":"SKU-1","quantity":1,"a\\u0000b":1}']],
      ['a NUL in the cancel reason', (id) => [`/v1/orders/${id}/cancel`, '{"reason":"changed\\u0000mind"}']],
      ['a lone surrogate in the cancel reason', (id) => [`/v1/orders/${id}/cancel`, '{"reason":"bad \\ud800 text"}']],
      ['a lone low surrogate in customerRef', () => ['/v1/orders', '{"sku":"SKU-1","quantity":1,"customerRef":"ref-\\udfff"}']],
      ['surrogates in the wrong order in customerRef', () => ['/v1/orders', '{"sku":"SKU-1","quantity":1,"customerRef":"\\udc00\\ud800"}']],
    ];

    it.each(cases)('%s', async (_name, request) => {
      const { tenantId, apiKey } = await db.tenant();
      const client = new ApiClientSession(api.url, apiKey);
      const placed = await client.createOrder(`k-${randomUUID()}`, { sku: 'SKU-1', quantity: 1 });
      expect(placed.status).toBe(201);
      const before = await db.counts(tenantId);

      const [path, body] = request(placed.body.id);
      const key = `k-${randomUUID()}`;
      const result = await post(apiKey, path, body, key);
      expectProblem(result, 400);
      expect(result.body.type).toBe('/problems/invalid-request');
      expect(await db.counts(tenantId)).toEqual(before);
      // The key was never used: a valid request with it now executes.
      const valid = path.endsWith('/cancel') ? { reason: 'changed my mind' } : { sku: 'SKU-1', quantity: 1 };
      expect((await post(apiKey, path, JSON.stringify(valid), key)).status).toBe(path.endsWith('/cancel') ? 200 : 201);
    });

    it('a valid surrogate pair (an emoji) is accepted and comes back as sent', async () => {
      const { apiKey } = await db.tenant();
      const result = await post(
        apiKey,
        '/v1/orders',
        JSON.stringify({ sku: 'SKU-1', quantity: 1, customerRef: `ref-${randomUUID().slice(0, 8)}-🚚` }),
      );
      expect(result.status).toBe(201);
      expect(result.body.customerRef).toMatch(/-🚚$/);
    });
  });

  describe('random requests', () => {
    /** Strings with the characters that break things: NUL, controls, lone surrogates, quotes, non-ASCII. */
    const nasty = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 20 }),
      fc.string({
        unit: fc.constantFrom('\u0000', '\ud800', '\udfff', '"', '\\', '%', '/', 'é', '🚚', 'a', '1', ' ', '\n'),
        maxLength: 12,
      }),
    );
    const value: fc.Arbitrary<unknown> = fc.oneof(
      nasty,
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.jsonValue({ maxDepth: 3 }),
    );
    const body = fc.oneof(
      fc
        .record(
          { sku: fc.oneof(fc.constant('SKU-1'), value), quantity: fc.oneof(fc.constant(1), value), customerRef: value, reason: value },
          { requiredKeys: [] },
        )
        .map((o) => JSON.stringify(o)),
      fc.dictionary(nasty, value, { maxKeys: 4 }).map((o) => JSON.stringify(o)),
      fc.integer({ min: 1, max: 4_000 }).map((depth) => `{"sku":"SKU-1","quantity":1,"x":${nested(depth)}}`),
      nasty, // not JSON, or JSON that is not an object
    );
    /** Path segments: a real order of the caller, another tenant's order, ids in other spellings, junk. */
    const idChoice = fc.oneof(
      fc.constantFrom('own', 'own-upper', 'foreign'),
      nasty.map((s) => `raw:${s}`),
      fc.constantFrom('raw:%00', 'raw:%E0%A4%A', 'raw:%', 'raw:..', 'raw:%2F', 'raw:00000000-0000-0000-0000-000000000000'),
    );
    const requestShape = fc.record({
      endpoint: fc.constantFrom('create', 'cancel', 'read', 'receipt', 'no-such-route'),
      // Mostly the endpoint's own method; sometimes one it does not take.
      method: fc.oneof({ weight: 4, arbitrary: fc.constant('own') }, fc.constantFrom('PUT', 'DELETE', 'PATCH', 'GET', 'POST')),
      expectation: fc.constantFrom('none', 'none', 'none', '100-continue', 'bogus'),
      contentEncoding: fc.constantFrom('none', 'none', 'none', 'gzip', 'deflate', 'br', 'identity', 'compress'),
      id: idChoice,
      credential: fc.constantFrom('own', 'foreign', 'junk', 'none', 'revoked-shape'),
      key: fc.oneof(fc.constant('fresh'), fc.constant('none'), fc.string({ unit: 'grapheme-ascii', maxLength: 300 })),
      contentType: fc.constantFrom(
        'application/json',
        'application/merge-patch+json',
        'text/plain',
        'none',
        'application/json; charset=latin1',
      ),
      body,
    });

    it("never a 5xx, a reset, an undocumented problem type, a stored refusal or another tenant's data", async () => {
      // Clients type errors by `type` (libs/client): every one the service answers must be in its document.
      const documented = new Set(Object.keys((await http(`${fixture.api.managementUrl}/docs-json`)).body['x-problem-types']));
      expect(documented).toContain('/problems/invalid-request');
      const own = await db.tenant();
      const foreign = await db.tenant();
      const ownClient = new ApiClientSession(api.url, own.apiKey);
      const foreignClient = new ApiClientSession(api.url, foreign.apiKey);
      const ownOrder = (await ownClient.createOrder(`k-${randomUUID()}`, { sku: 'SKU-1', quantity: 1 })).body.id as string;
      const foreignOrder = (
        await foreignClient.createOrder(`k-${randomUUID()}`, { sku: 'SKU-1', quantity: 1, customerRef: `secret-${randomUUID()}` })
      ).body;
      const foreignSecrets = [foreignOrder.id, foreignOrder.customerRef, foreign.tenantId];

      await fc.assert(
        fc.asyncProperty(requestShape, async (shape) => {
          const id =
            shape.id === 'own'
              ? ownOrder
              : shape.id === 'own-upper'
                ? ownOrder.toUpperCase()
                : shape.id === 'foreign'
                  ? foreignOrder.id
                  : pathSegment(shape.id.slice(4));
          const path = {
            create: '/v1/orders',
            cancel: `/v1/orders/${id}/cancel`,
            read: `/v1/orders/${id}`,
            receipt: `/v1/idempotency-receipts/orders.create/${id}`,
            'no-such-route': `/v1/${id}/x`,
          }[shape.endpoint];
          const headers: Record<string, string> = {};
          const credential = {
            own: own.apiKey,
            foreign: foreign.apiKey,
            junk: 'not-a-key',
            none: '',
            'revoked-shape': `${own.apiKey.slice(0, -2)}xx`,
          }[shape.credential];
          if (credential) headers.Authorization = `Bearer ${credential}`;
          const key = shape.key === 'fresh' ? `k-${randomUUID()}` : shape.key === 'none' ? undefined : shape.key;
          if (key !== undefined) headers['Idempotency-Key'] = key;
          if (shape.contentType !== 'none') headers['Content-Type'] = shape.contentType;
          if (shape.expectation !== 'none') headers.Expect = shape.expectation;
          if (shape.contentEncoding !== 'none') headers['Content-Encoding'] = shape.contentEncoding;
          const method =
            shape.method !== 'own' ? shape.method : shape.endpoint === 'create' || shape.endpoint === 'cancel' ? 'POST' : 'GET';

          const before = await db.counts(own.tenantId);
          let result: HttpResult;
          try {
            // A body only where Node's client frames it (Content-Length): it sends a DELETE's unframed, and
            // the server rightly reads those bytes as a second, malformed request.
            const body = ['POST', 'PUT', 'PATCH'].includes(method) ? shape.body : undefined;
            result = await http(`${api.url}${path}`, { method, headers, body });
          } catch (error) {
            // Node's client refuses some header values itself (ERR_INVALID_CHAR): nothing was sent.
            if (
              (error as { code?: string }).code === 'ERR_INVALID_CHAR' ||
              (error as { code?: string }).code === 'ERR_UNESCAPED_CHARACTERS'
            )
              return;
            throw error;
          }
          expect(result.status).toBeLessThan(500);
          if (result.status >= 400) {
            expect(result.headers['content-type']).toMatch(PROBLEM_JSON);
            const type = result.body?.type;
            expect({ type, documented: documented.has(type), status: result.body?.status }).toEqual({
              type,
              documented: true,
              status: result.status,
            });
          }
          if (shape.credential === 'own') {
            // The foreign order id may come back only as the caller's own input (`instance`, "No order …").
            const secrets = path.includes(foreignOrder.id) ? foreignSecrets.slice(1) : foreignSecrets;
            for (const secret of secrets) expect(result.text).not.toContain(secret);
            if (path.includes(foreignOrder.id)) expect(result.status).toBeGreaterThanOrEqual(400);
          }
          // Refused before any receipt: nothing stored under the key, no new order.
          if ([400, 401, 403, 413, 415, 422].includes(result.status)) {
            expect(await db.counts(own.tenantId)).toMatchObject({ orders: before.orders, receipts: before.receipts });
            if (key !== undefined && shape.key === 'fresh') {
              const stored = await db.pool.query('SELECT 1 FROM idempotency_receipts WHERE idempotency_key = $1', [key]);
              expect(stored.rowCount).toBe(0);
            }
          }
        }),
        searchSettings({ fast: 300, long: 5_000 }),
      );
    });
  });
});
