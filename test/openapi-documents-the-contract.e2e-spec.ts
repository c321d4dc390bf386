import { RunningApp, startApp } from './support/apps';
import { http } from './support/http';

const PROBLEM_JSON = 'application/problem+json';

type Responses = Record<string, { description: string; headers?: Record<string, unknown>; content?: Record<string, { schema: { $ref?: string } }> }>;

/**
 * The OpenAPI document upstream services generate clients from (served by the running app at
 * /docs-json, the JSON behind /docs) states the same contract the other suites prove over HTTP:
 * every status, the Idempotency-Key header, the replay and retention headers, the field rules, and
 * that errors are application/problem+json.
 */
describe('the OpenAPI document of the command API', () => {
  let api: RunningApp;
  let doc: any;

  beforeAll(async () => {
    api = await startApp('command-api');
    const response = await http(`${api.url}/docs-json`);
    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    doc = response.body;
  });
  afterAll(async () => {
    await api.stop();
  });

  const operation = (path: string, method: string) => {
    const found = doc.paths[path]?.[method];
    if (!found) throw new Error(`${method.toUpperCase()} ${path} is not documented; paths: ${Object.keys(doc.paths).join(', ')}`);
    return found;
  };
  const schema = (ref: string) => doc.components.schemas[ref.replace('#/components/schemas/', '')];

  function expectStatuses(responses: Responses, statuses: string[]) {
    expect(Object.keys(responses)).toEqual(expect.arrayContaining(statuses));
    for (const status of statuses) expect(responses[status].description).toEqual(expect.any(String));
  }

  /** Every documented error is a problem document, in the media type the service really sends. */
  function expectProblemResponses(responses: Responses) {
    const errors = Object.entries(responses).filter(([status]) => Number(status) >= 400);
    expect(errors.length).toBeGreaterThan(0);
    for (const [status, response] of errors) {
      expect({ status, mediaTypes: Object.keys(response.content ?? {}) }).toEqual({ status, mediaTypes: [PROBLEM_JSON] });
      expect(schema(response.content![PROBLEM_JSON].schema.$ref!)).toMatchObject({
        required: expect.arrayContaining(['type', 'title', 'status']),
      });
    }
  }

  it('is an OpenAPI 3 document that serves its UI at /docs and says errors are problem+json', async () => {
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.info.title).toBe('command-api');
    expect(doc.info.description).toMatch(/Idempotency-Key/);
    expect(doc.info.description).toMatch(/application\/problem\+json/);
    expect(doc.components.securitySchemes).toMatchObject({ bearer: { type: 'http', scheme: 'bearer' } });
    const ui = await http(`${api.url}/docs`);
    expect(ui.status).toBe(200);
    expect(ui.headers['content-type']).toMatch(/^text\/html/);
  });

  it('POST /v1/orders documents every outcome, the Idempotency-Key header and the replay headers', () => {
    const create = operation('/v1/orders', 'post');
    expect(create.operationId).toBe('orders.create');
    expect(create.security).toEqual([{ bearer: [] }]);
    expectStatuses(create.responses, ['201', '400', '401', '403', '409', '413', '415', '422', '503']);
    expectProblemResponses(create.responses);

    expect(create.parameters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: true, schema: expect.objectContaining({ type: 'string' }) }),
      ]),
    );
    const key = create.parameters.find((p: { name: string }) => p.name === 'Idempotency-Key');
    expect(key.description).toMatch(/1-255/);
    expect(key.description).toMatch(/0x21-0x7E/);

    const created = create.responses['201'];
    expect(Object.keys(created.headers)).toEqual(expect.arrayContaining(['Location', 'Idempotency-Expires', 'Idempotent-Replayed']));
    expect(created.headers['Idempotent-Replayed'].schema).toMatchObject({ enum: ['true'] });
    expect(created.headers['Idempotency-Expires'].description).toMatch(/HTTP date/);
    expect(schema(created.content['application/json'].schema.$ref)).toMatchObject({
      required: expect.arrayContaining(['id', 'sku', 'quantity', 'customerRef', 'status', 'createdAt']),
      properties: { status: { enum: ['placed', 'cancelled'] }, quantity: { type: 'integer' } },
    });

    // The outcomes a client must tell apart are described, not only numbered.
    expect(create.responses['409'].description).toMatch(/customer-ref-already-used/);
    expect(create.responses['409'].description).toMatch(/in progress/);
    expect(create.responses['409'].headers).toHaveProperty('Retry-After');
    expect(create.responses['503'].headers).toHaveProperty('Retry-After');
    expect(create.responses['422'].description).toMatch(/different fields/);
    expect(create.responses['413'].description).toMatch(/16 KiB/);
    expect(create.responses['401'].headers).toHaveProperty('WWW-Authenticate');
  });

  it('the create body documents the field rules the API enforces', () => {
    const body = operation('/v1/orders', 'post').requestBody;
    expect(body.required).toBe(true);
    expect(schema(body.content['application/json'].schema.$ref)).toEqual({
      type: 'object',
      properties: {
        sku: expect.objectContaining({ type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$' }),
        quantity: expect.objectContaining({ type: 'integer', minimum: 1, maximum: 10000 }),
        customerRef: expect.objectContaining({ type: 'string', minLength: 1, maxLength: 64 }),
      },
      required: ['sku', 'quantity'],
    });
  });

  it('POST /v1/orders/{id}/cancel documents 200, 404, 409, 422 and the rest', () => {
    const cancel = operation('/v1/orders/{id}/cancel', 'post');
    expect(cancel.operationId).toBe('orders.cancel');
    expectStatuses(cancel.responses, ['200', '400', '401', '403', '404', '409', '413', '415', '422', '503']);
    expectProblemResponses(cancel.responses);
    expect(cancel.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`)).toEqual(
      expect.arrayContaining(['path:id', 'header:Idempotency-Key']),
    );
    expect(Object.keys(cancel.responses['200'].headers)).toEqual(expect.arrayContaining(['Idempotency-Expires', 'Idempotent-Replayed']));
    expect(cancel.responses['404'].description).toMatch(/another tenant/);
    expect(cancel.responses['404'].description).toMatch(/replayed/);
    expect(cancel.responses['409'].description).toMatch(/[Aa]lready cancelled/);
    expect(schema(cancel.requestBody.content['application/json'].schema.$ref)).toMatchObject({
      properties: { reason: { type: 'string', minLength: 1, maxLength: 200 } },
      required: ['reason'],
    });
  });

  it('GET /v1/orders/{id} and GET /v1/idempotency-receipts/{operation}/{key} exist with their outcomes', () => {
    const read = operation('/v1/orders/{id}', 'get');
    expect(read.operationId).toBe('orders.read');
    // 400: the id is not a UUID (the API answers so; see bad-input-stores-nothing for the cancel route).
    expectStatuses(read.responses, ['200', '400', '401', '403', '404', '503']);
    expectProblemResponses(read.responses);

    const receipts = operation('/v1/idempotency-receipts/{operation}/{key}', 'get');
    expectStatuses(receipts.responses, ['200', '400', '401', '403', '404']);
    expectProblemResponses(receipts.responses);
    const byName = Object.fromEntries(receipts.parameters.map((p: { name: string }) => [p.name, p]));
    expect(byName.operation).toMatchObject({ in: 'path', required: true, schema: { enum: ['orders.create', 'orders.cancel'] } });
    expect(byName.key).toMatchObject({ in: 'path', required: true });
    const receipt = schema(receipts.responses['200'].content['application/json'].schema.$ref);
    expect(Object.keys(receipt.properties)).toEqual(
      expect.arrayContaining([
        'operation',
        'key',
        'status',
        'responseStatus',
        'effect',
        'region',
        'fingerprintVersion',
        'createdAt',
        'completedAt',
        'expiresAt',
      ]),
    );
    expect(receipt.properties.status.enum).toEqual(['completed', 'expired']);
  });
});
