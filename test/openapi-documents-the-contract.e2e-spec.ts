import { z } from 'zod';
import { cancelOrderRequest } from '../apps/command-api/src/orders/cancel-order/cancel-order.request.dto';
import { createOrderRequest } from '../apps/command-api/src/orders/create-order/create-order.request.dto';
import { RunningApp, startApp } from './support/apps';
import { http } from './support/http';

type SchemaObject = Record<string, unknown> & { anyOf?: SchemaObject[]; type?: string };
type ObjectSchema = { properties: Record<string, SchemaObject>; required?: string[]; additionalProperties?: unknown };

/** The keywords of a body's schema that state a rule (descriptions and examples do not). */
const RULES = ['type', 'pattern', 'minLength', 'maxLength', 'minimum', 'maximum', 'nullable', 'enum', 'format'];

function rules({ properties, required }: ObjectSchema) {
  const pick = (property: SchemaObject) => Object.fromEntries(Object.entries(property).filter(([keyword]) => RULES.includes(keyword)));
  return {
    properties: Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, pick(property)])),
    required: required ?? [],
  };
}

/**
 * The rules a body's zod schema enforces (what the API validates with), as OpenAPI 3.0 writes them:
 * a nullable field is `nullable: true` rather than a branch of type null.
 */
function enforcedRules(schema: z.ZodType) {
  const json = z.toJSONSchema(schema) as ObjectSchema;
  const properties = Object.fromEntries(
    Object.entries(json.properties).map(([name, property]) => {
      const notNull = property.anyOf?.filter((branch) => branch.type !== 'null');
      return [name, notNull?.length === 1 ? { ...notNull[0], nullable: true } : property];
    }),
  );
  return rules({ properties, required: json.required });
}

const PROBLEM_JSON = 'application/problem+json';
const REQUEST_ID = 'X-Request-Id';

const REPLAY = ['Idempotency-Expires', 'Idempotent-Replayed'];
const AUTHENTICATED = {
  401: ['WWW-Authenticate'],
  403: [],
  429: ['Retry-After', 'RateLimit-Policy', 'RateLimit'],
  500: [],
  503: ['Retry-After'],
};
const COMMAND = { ...AUTHENTICATED, 400: [], 413: [], 415: [], 422: [] };

/**
 * Every operation of the command API, every status it can return (no more, no fewer), and the headers
 * each of those responses carries besides X-Request-Id, which every response carries. Stored domain
 * outcomes (404, 409 of a command) carry the replay headers; 409 "in progress" carries Retry-After.
 */
const CONTRACT: Record<string, Record<number, string[]>> = {
  'post /v1/orders': { ...COMMAND, 201: ['Location', ...REPLAY], 409: ['Retry-After', ...REPLAY] },
  'post /v1/orders/{id}/cancel': { ...COMMAND, 200: REPLAY, 404: REPLAY, 409: ['Retry-After', ...REPLAY] },
  'get /v1/orders/{id}': { ...AUTHENTICATED, 200: [], 400: [], 404: [] },
  'get /v1/idempotency-receipts/{operation}/{key}': { ...AUTHENTICATED, 200: [], 400: [], 404: [] },
  'get /health/live': { 200: [] },
  'get /health/ready': { 200: [], 503: ['Retry-After'] },
};

type Responses = Record<
  string,
  { description: string; headers?: Record<string, unknown>; content?: Record<string, { schema: { $ref?: string } }> }
>;

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
    const response = await http(`${api.managementUrl}/docs-json`);
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

  it('documents exactly the operations of the contract table (and not /metrics, which is for Prometheus)', () => {
    const documented = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.keys(methods as object).map((method) => `${method} ${path}`),
    );
    expect(documented.sort()).toEqual(Object.keys(CONTRACT).sort());
  });

  it.each(Object.entries(CONTRACT))('%s documents every status it can return, with its headers and X-Request-Id', (route, statuses) => {
    const [method, path] = route.split(' ');
    const { responses, parameters } = operation(path, method) as {
      responses: Responses;
      parameters?: { name: string; in: string; required?: boolean }[];
    };
    expect(Object.keys(responses).sort()).toEqual(Object.keys(statuses).sort());
    for (const [status, headers] of Object.entries(statuses)) {
      const response = responses[status];
      expect({ status, description: response.description }).toEqual({ status, description: expect.stringMatching(/\w/) });
      const documentedHeaders = Object.keys(response.headers ?? {}).sort();
      expect({ status, headers: documentedHeaders }).toEqual({ status, headers: [...headers, REQUEST_ID].sort() });
      if (Number(status) >= 400) {
        expect({ status, mediaTypes: Object.keys(response.content ?? {}) }).toEqual({ status, mediaTypes: [PROBLEM_JSON] });
      }
    }
    expect(parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: REQUEST_ID, in: 'header', required: false })]));
  });

  it('is served with its UI on the management port only, with "try it out" aimed at the public port', async () => {
    expect(api.managementUrl).not.toBe(api.url);
    for (const path of ['/docs', '/docs-json', '/metrics']) expect((await http(`${api.url}${path}`)).status).toBe(404);
    expect((await http(`${api.managementUrl}/metrics`)).text).toMatch(/^# HELP /m);
    expect(doc.servers).toEqual([{ url: api.url }]);
  });

  it('the management port answers its errors as the API does: problem+json of a documented type', async () => {
    const missing = await http(`${api.managementUrl}/no-such-page`);
    expect({ status: missing.status, contentType: missing.headers['content-type'] }).toEqual({
      status: 404,
      contentType: expect.stringMatching(/^application\/problem\+json/),
    });
    expect(doc['x-problem-types'][missing.body.type]).toEqual({ status: 404, title: missing.body.title });
    const expectation = await http(`${api.managementUrl}/metrics`, { headers: { Expect: 'bogus' } });
    expect({ status: expectation.status, type: expectation.body?.type }).toEqual({ status: 417, type: '/problems/expectation-failed' });
    // No route there takes a body: one too large for a body parser is still only "no such route".
    const body = JSON.stringify({ pad: 'x'.repeat(300_000) });
    const posted = await http(`${api.managementUrl}/metrics`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    expect({ status: posted.status, type: posted.body?.type }).toEqual({ status: 404, type: '/problems/not-found' });
  });

  it("lists the readiness probe's 503 among the problem types", () => {
    expect(doc['x-problem-types']['/problems/dependency-unavailable']).toEqual({ status: 503, title: 'Dependency unavailable' });
  });

  it('is an OpenAPI 3 document that serves its UI at /docs and says errors are problem+json', async () => {
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.info.title).toBe('command-api');
    expect(doc.info.description).toMatch(/Idempotency-Key/);
    expect(doc.info.description).toMatch(/application\/problem\+json/);
    expect(doc.components.securitySchemes).toMatchObject({ bearer: { type: 'http', scheme: 'bearer' } });
    const ui = await http(`${api.managementUrl}/docs`);
    expect(ui.status).toBe(200);
    expect(ui.headers['content-type']).toMatch(/^text\/html/);
  });

  it('POST /v1/orders describes its outcomes, the Idempotency-Key header and the replay headers', () => {
    const create = operation('/v1/orders', 'post');
    expect(create.operationId).toBe('orders.create');
    expect(create.security).toEqual([{ bearer: [] }]);
    expectProblemResponses(create.responses);

    expect(create.parameters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: 'Idempotency-Key',
          in: 'header',
          required: true,
          schema: expect.objectContaining({ type: 'string' }),
        }),
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
    expect(create.responses['422'].description).toMatch(/idempotency-key-expired.*tombstone/);
    expect(create.responses['413'].description).toMatch(/16 KiB/);
    expect(create.responses['401'].headers).toHaveProperty('WWW-Authenticate');
  });

  it('the 422 of both commands names the members of a tombstone refusal: expiredAt and tombstoneUntil', () => {
    for (const [path, name] of [
      ['/v1/orders', 'create'],
      ['/v1/orders/{id}/cancel', 'cancel'],
    ]) {
      const refused = operation(path, 'post').responses['422'];
      expect({ name, properties: schema(refused.content[PROBLEM_JSON].schema.$ref).properties }).toMatchObject({
        name,
        properties: {
          type: { type: 'string' },
          expiredAt: { type: 'string', format: 'date-time' },
          tombstoneUntil: { type: 'string', format: 'date-time' },
        },
      });
    }
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
    // The document states exactly the rules the API validates with: no rule documented but not
    // enforced, none enforced but not documented.
    expect(rules(schema(body.content['application/json'].schema.$ref))).toEqual(enforcedRules(createOrderRequest));
  });

  it('POST /v1/orders/{id}/cancel documents its domain outcomes and its body', () => {
    const cancel = operation('/v1/orders/{id}/cancel', 'post');
    expect(cancel.operationId).toBe('orders.cancel');
    expectProblemResponses(cancel.responses);
    expect(cancel.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`)).toEqual(
      expect.arrayContaining(['path:id', 'header:Idempotency-Key']),
    );
    expect(Object.keys(cancel.responses['200'].headers)).toEqual(expect.arrayContaining(['Idempotency-Expires', 'Idempotent-Replayed']));
    expect(cancel.responses['404'].description).toMatch(/another tenant/);
    expect(cancel.responses['404'].description).toMatch(/replayed/);
    expect(cancel.responses['409'].description).toMatch(/[Aa]lready cancelled/);
    expect(cancel.responses['422'].description).toMatch(/idempotency-key-reused.*idempotency-key-expired/s);
    expect(schema(cancel.requestBody.content['application/json'].schema.$ref)).toMatchObject({
      properties: { reason: { type: 'string', minLength: 1, maxLength: 200 } },
      required: ['reason'],
    });
    expect(rules(schema(cancel.requestBody.content['application/json'].schema.$ref))).toEqual(enforcedRules(cancelOrderRequest));
  });

  it('GET /v1/orders/{id} and GET /v1/idempotency-receipts/{operation}/{key} describe their parameters and bodies', () => {
    const read = operation('/v1/orders/{id}', 'get');
    expect(read.operationId).toBe('orders.read');
    expectProblemResponses(read.responses);

    // One order id parameter on both routes, stating the id rule: any letter case, one order, answered in lower case.
    for (const route of [read, operation('/v1/orders/{id}/cancel', 'post')]) {
      const ids = route.parameters.filter((p: { in: string; name: string }) => p.in === 'path' && p.name === 'id');
      expect(ids).toEqual([
        expect.objectContaining({
          required: true,
          schema: {
            type: 'string',
            format: 'uuid',
            pattern: '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$',
          },
          description: expect.stringMatching(/any letter case.*same order.*same request.*lower case/s),
        }),
      ]);
    }

    const receipts = operation('/v1/idempotency-receipts/{operation}/{key}', 'get');
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
        'tombstoneUntil',
      ]),
    );
    expect(receipt.properties.status.enum).toEqual(['completed', 'expired']);
    expect(receipt.properties.tombstoneUntil).toMatchObject({ type: 'string', format: 'date-time', nullable: true });
    expect(receipt.required).toContain('tombstoneUntil');
  });
});
