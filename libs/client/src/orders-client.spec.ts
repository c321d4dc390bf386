import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import {
  ForbiddenError,
  InvalidRequestError,
  OutcomeExpiredError,
  OutcomeUnknownError,
  RateLimitedError,
  RequestInProgressError,
  ServerError,
  ServiceUnavailableError,
  UnexpectedResponseError,
} from './errors';
import { OrdersClient, RetryEvent } from './orders-client';

/**
 * Which answers the client retries and which it throws at once, against a scripted HTTP server (the
 * service itself, with its database, is in test/client-applies-each-action-once-through-faults.e2e-spec.ts).
 */
/** status 0: the server takes the request and never answers. */
type Reply = { status: number; problem?: string; headers?: Record<string, string>; body?: string };

const order = { id: '0f8fad5b-d9cb-469f-a165-70867728950e', sku: 'S', quantity: 1, customerRef: null, status: 'placed' };
const created: Reply = { status: 201, body: JSON.stringify(order), headers: { 'Idempotency-Expires': 'Sat, 05 Dec 2026 12:00:00 GMT' } };
const problem = (status: number, slug: string, headers: Record<string, string> = {}): Reply => ({
  status,
  problem: `/problems/${slug}`,
  headers,
});

describe('OrdersClient: what is retried', () => {
  let server: Server;
  let url: string;
  let script: Reply[];
  let requests: { method: string; path: string; key?: string; at: number }[];

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      req.on('end', () => {
        requests.push({ method: req.method!, path: req.url!, key: req.headers['idempotency-key'] as string, at: Date.now() });
        const reply = script.shift() ?? problem(500, 'internal-server-error');
        if (reply.status === 0) return; // never answers
        const body = reply.problem
          ? JSON.stringify({ type: reply.problem, title: reply.problem, status: reply.status })
          : (reply.body ?? '');
        const type = reply.problem ? 'application/problem+json' : 'application/json';
        res.writeHead(reply.status, { 'Content-Type': type, ...reply.headers }).end(body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  beforeEach(() => {
    script = [];
    requests = [];
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const client = (events: RetryEvent[] = [], deadlineMs = 5_000) =>
    new OrdersClient({
      baseUrl: url,
      apiKey: 'k',
      retry: { baseDelayMs: 5, maxDelayMs: 20, deadlineMs, minAttemptMs: 400 },
      onRetry: (event) => events.push(event),
    });

  it.each([
    [problem(400, 'invalid-request'), InvalidRequestError],
    [problem(403, 'forbidden'), ForbiddenError],
    [problem(500, 'internal-server-error'), ServerError],
  ])('throws %j at once, typed, after one request', async (reply, Type) => {
    script = [reply];
    const error = await client()
      .createOrder({ sku: 'S', quantity: 1 })
      .catch((failure) => failure);
    expect(error).toBeInstanceOf(Type);
    expect(requests).toHaveLength(1);
  });

  it('retries 409 in progress and 429 with the same key, waiting Retry-After, and reports each wait', async () => {
    const events: RetryEvent[] = [];
    script = [
      problem(409, 'idempotency-request-in-progress', { 'Retry-After': '0' }),
      problem(429, 'rate-limited', { 'Retry-After': '1' }),
      created,
    ];
    const outcome = await client(events).createOrder({ sku: 'S', quantity: 1 });
    expect(outcome).toMatchObject({ status: 201, attempts: 3, replayed: false, resolvedFromReceipt: false, value: order });
    expect(outcome.expiresAt).toEqual(new Date('2026-12-05T12:00:00Z'));
    expect(new Set(requests.map((request) => request.key))).toEqual(new Set([outcome.key]));
    expect(requests[2].at - requests[1].at).toBeGreaterThanOrEqual(1_000);
    expect(events.map((event) => [event.attempt, event.outcomeUnknown])).toEqual([
      [1, false],
      [2, false],
    ]);
  });

  it('retries a 408 (the request did not arrive whole in time, so nothing was applied) with the same key, without asking for the receipt', async () => {
    const events: RetryEvent[] = [];
    script = [problem(408, 'request-timeout'), created];
    const outcome = await client(events).createOrder({ sku: 'S', quantity: 1 });
    expect(outcome).toMatchObject({ status: 201, attempts: 2, resolvedFromReceipt: false, value: order });
    expect(requests.map((request) => [request.method, request.key])).toEqual([
      ['POST', outcome.key],
      ['POST', outcome.key],
    ]);
    expect(events.map((event) => [event.attempt, event.outcomeUnknown])).toEqual([[1, false]]);
    // A read too.
    script = [problem(408, 'request-timeout'), { status: 200, body: JSON.stringify(order) }];
    expect(await client().getOrder(order.id)).toEqual(order);
  });

  it('asks for the receipt after a 503 before sending again (the database may have failed during COMMIT)', async () => {
    script = [problem(503, 'service-unavailable', { 'Retry-After': '0' }), problem(404, 'receipt-not-found'), created];
    const outcome = await client().createOrder({ sku: 'S', quantity: 1 }, { key: 'k-503' });
    expect(requests.map((request) => `${request.method} ${request.path}`)).toEqual([
      'POST /v1/orders',
      'GET /v1/idempotency-receipts/orders.create/k-503',
      'POST /v1/orders',
    ]);
    expect(outcome).toMatchObject({ attempts: 2, resolvedFromReceipt: false });
  });

  it('a 504 from a gateway is an unknown outcome; a receipt that says applied is reported', async () => {
    script = [
      { status: 504, body: 'gateway timeout', headers: { 'Content-Type': 'text/plain' } },
      { status: 200, body: JSON.stringify({ status: 'completed', expiresAt: '2026-12-05T12:00:00Z' }) },
      { ...created, headers: { ...created.headers, 'Idempotent-Replayed': 'true' } },
    ];
    const outcome = await client().createOrder({ sku: 'S', quantity: 1 });
    expect(outcome).toMatchObject({ replayed: true, resolvedFromReceipt: true, attempts: 2 });
  });

  it("after an unknown outcome, a receipt that expired before the call began is an earlier action's: sent again; one that expired since is this call's", async () => {
    const gateway: Reply = { status: 504, body: 'gateway timeout', headers: { 'Content-Type': 'text/plain' } };
    const expired = (expiresAt: string): Reply => ({
      status: 200,
      body: JSON.stringify({ status: 'expired', responseStatus: 201, effect: { type: 'order', id: order.id }, expiresAt }),
    });
    script = [gateway, expired('2020-01-01T00:00:00Z'), created];
    const outcome = await client().createOrder({ sku: 'S', quantity: 1 }, { key: 'k-reused' });
    expect(outcome).toMatchObject({ resolvedFromReceipt: false, attempts: 2 });
    expect(requests.map((request) => request.method)).toEqual(['POST', 'GET', 'POST']);

    requests = [];
    script = [gateway, expired(new Date(Date.now() + 60_000).toISOString())];
    const error = await client()
      .createOrder({ sku: 'S', quantity: 1 }, { key: 'k-expired' })
      .catch((failure) => failure);
    expect(error).toBeInstanceOf(OutcomeExpiredError);
    expect(requests.map((request) => request.method)).toEqual(['POST', 'GET']);
  });

  it('gives up at the deadline: the last error when the outcome is known, OutcomeUnknownError when it is not', async () => {
    script = Array(5_000).fill(problem(409, 'idempotency-request-in-progress', { 'Retry-After': '0' }));
    await expect(client([], 1_500).createOrder({ sku: 'S', quantity: 1 })).rejects.toBeInstanceOf(RequestInProgressError);
    script = Array(5_000).fill(problem(429, 'rate-limited', { 'Retry-After': '0' }));
    await expect(client([], 1_500).cancelOrder(order.id, 'r')).rejects.toBeInstanceOf(RateLimitedError);
    script = Array(5_000).fill(problem(503, 'service-unavailable', { 'Retry-After': '0' }));
    const unknown = await client([], 1_500)
      .createOrder({ sku: 'S', quantity: 1 }, { key: 'k-unknown' })
      .catch((failure) => failure);
    expect(unknown).toBeInstanceOf(OutcomeUnknownError);
    expect(unknown).toMatchObject({ key: 'k-unknown' });
    expect(unknown.cause).toBeInstanceOf(ServiceUnavailableError);
  });

  it('a Retry-After beyond the deadline ends the call at once instead of waiting past it', async () => {
    script = [problem(429, 'rate-limited', { 'Retry-After': '60' })];
    const started = Date.now();
    await expect(client([], 2_000).createOrder({ sku: 'S', quantity: 1 })).rejects.toBeInstanceOf(RateLimitedError);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('an answer that is not the API (no problem document) is UnexpectedResponseError, not retried', async () => {
    script = [{ status: 404, body: '<html>not here</html>', headers: { 'Content-Type': 'text/html' } }];
    await expect(client().getOrder(order.id)).rejects.toBeInstanceOf(UnexpectedResponseError);
    expect(requests).toHaveLength(1);
  });

  const plain = (status: number, headers: Record<string, string> = {}): Reply => ({
    status,
    body: `gateway answered ${status}`,
    headers: { 'Content-Type': 'text/plain', ...headers },
  });

  it('a plain 503 from a gateway (a deploy draining) is an unknown outcome: waits Retry-After, asks the receipt, sends again with the same key', async () => {
    const events: RetryEvent[] = [];
    script = [plain(503, { 'Retry-After': '1' }), problem(404, 'receipt-not-found'), created];
    const outcome = await client(events).createOrder({ sku: 'S', quantity: 1 }, { key: 'k-plain-503' });
    expect(requests.map((request) => `${request.method} ${request.path} ${request.key ?? ''}`.trim())).toEqual([
      'POST /v1/orders k-plain-503',
      'GET /v1/idempotency-receipts/orders.create/k-plain-503',
      'POST /v1/orders k-plain-503',
    ]);
    expect(requests[1].at - requests[0].at).toBeGreaterThanOrEqual(1_000);
    expect(outcome).toMatchObject({ status: 201, attempts: 2, resolvedFromReceipt: false });
    expect(events.map((event) => [event.reason, event.outcomeUnknown])).toEqual([['503 from a gateway', true]]);
  });

  it.each([429, 408])('a plain %i from a gateway kept the request: sent again with the same key, honouring Retry-After', async (status) => {
    script = [plain(status, { 'Retry-After': '1' }), created];
    const outcome = await client().createOrder({ sku: 'S', quantity: 1 }, { key: `k-plain-${status}` });
    expect(requests.map((request) => [request.method, request.key])).toEqual([
      ['POST', `k-plain-${status}`],
      ['POST', `k-plain-${status}`],
    ]);
    expect(requests[1].at - requests[0].at).toBeGreaterThanOrEqual(1_000);
    expect(outcome).toMatchObject({ status: 201, attempts: 2 });
  });

  it('at the deadline after plain 429s the error carries the key', async () => {
    script = Array(5_000).fill(plain(429, { 'Retry-After': '0' }));
    const error = await client([], 1_500)
      .createOrder({ sku: 'S', quantity: 1 }, { key: 'k-429s' })
      .catch((failure) => failure);
    expect(error).toBeInstanceOf(UnexpectedResponseError);
    expect(error).toMatchObject({ status: 429, key: 'k-429s' });
  });

  it('any other answer that is not the API ends the call with the key: UnexpectedResponseError, or OutcomeUnknownError after an unknown outcome', async () => {
    script = [plain(500)];
    const first = await client()
      .createOrder({ sku: 'S', quantity: 1 })
      .catch((failure) => failure);
    expect(first).toBeInstanceOf(UnexpectedResponseError);
    expect(first).toMatchObject({ status: 500, key: requests[0].key });
    expect(requests).toHaveLength(1);

    requests = [];
    script = [
      { status: 504, body: 'gateway timeout', headers: { 'Content-Type': 'text/plain' } },
      problem(404, 'receipt-not-found'),
      plain(500),
    ];
    const after = await client()
      .createOrder({ sku: 'S', quantity: 1 }, { key: 'k-after-504' })
      .catch((failure) => failure);
    expect(after).toBeInstanceOf(OutcomeUnknownError);
    expect(after).toMatchObject({ key: 'k-after-504', attempts: 2 });
    expect(after.cause).toBeInstanceOf(UnexpectedResponseError);
    expect(requests.map((request) => request.method)).toEqual(['POST', 'GET', 'POST']);
  });

  it('a receipt lookup a gateway answers for itself is asked again, not read as "not applied"', async () => {
    script = [
      { status: 504, body: 'gateway timeout', headers: { 'Content-Type': 'text/plain' } },
      plain(500),
      plain(408),
      { status: 200, body: JSON.stringify({ status: 'completed', expiresAt: '2026-12-05T12:00:00Z' }) },
      { ...created, headers: { ...created.headers, 'Idempotent-Replayed': 'true' } },
    ];
    const outcome = await client().createOrder({ sku: 'S', quantity: 1 });
    expect(requests.map((request) => request.method)).toEqual(['POST', 'GET', 'GET', 'GET', 'POST']);
    expect(outcome).toMatchObject({ replayed: true, resolvedFromReceipt: true, attempts: 2 });
  });

  it('a read retries a plain 503 or 429 too', async () => {
    script = [plain(503, { 'Retry-After': '0' }), plain(429, { 'Retry-After': '0' }), { status: 200, body: JSON.stringify(order) }];
    expect(await client().getOrder(order.id)).toEqual(order);
    expect(requests).toHaveLength(3);
  });

  it('after a 409 in progress, a service that stops answering leaves the outcome unknown: the error carries the key', async () => {
    // The held request may commit as the service goes: a refused connection afterwards proves nothing.
    const going = createServer((_req, res) => {
      res.writeHead(409, { 'Content-Type': 'application/problem+json', 'Retry-After': '0' });
      res.end(JSON.stringify({ type: '/problems/idempotency-request-in-progress', title: 'in progress', status: 409 }), () => {
        going.closeAllConnections();
        going.close();
      });
    });
    await new Promise<void>((resolve) => going.listen(0, '127.0.0.1', resolve));
    const goingUrl = `http://127.0.0.1:${(going.address() as AddressInfo).port}`;
    const error = await new OrdersClient({ baseUrl: goingUrl, apiKey: 'k', retry: { baseDelayMs: 5, maxDelayMs: 20, deadlineMs: 1_000 } })
      .createOrder({ sku: 'S', quantity: 1 }, { key: 'k-held' })
      .catch((failure) => failure);
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    expect(error.key).toBe('k-held');
  });

  it("the caller's signal during the receipt lookup after a lost reply still says the outcome is unknown", async () => {
    script = [{ status: 504, body: 'gateway timeout', headers: { 'Content-Type': 'text/plain' } }, { status: 0 }];
    const error = await client()
      .createOrder({ sku: 'S', quantity: 1 }, { key: 'k-lookup-abort', signal: AbortSignal.timeout(500) })
      .catch((failure) => failure);
    expect(requests.map((request) => request.method)).toEqual(['POST', 'GET']);
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    expect(error.key).toBe('k-lookup-abort');
  });

  it("the caller's signal stops the call; an attempt in flight then leaves the outcome unknown", async () => {
    script = [];
    const slow = createServer(() => undefined); // accepts and never answers
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
    try {
      const error = await new OrdersClient({ baseUrl: slowUrl, apiKey: 'k' })
        .createOrder({ sku: 'S', quantity: 1 }, { key: 'k-abort', signal: AbortSignal.timeout(200) })
        .catch((failure) => failure);
      expect(error).toBeInstanceOf(OutcomeUnknownError);
      expect(error.key).toBe('k-abort');
    } finally {
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
    }
  });
});
