import { problemStatus } from './problems';
import type { CancelOrderFields, CreateOrderFields, Order, Receipt } from './types';

/** Every key of T, checked by the compiler: a field added to the type and not here does not compile. */
const allKeys =
  <T>() =>
  <const K extends readonly (keyof T & string)[]>(...keys: K & ([Exclude<keyof T, K[number]>] extends [never] ? unknown : never)) =>
    keys as readonly string[];

/** What this client assumes about the API, in a form an OpenAPI document can be compared with. */
export const clientContract = {
  operations: [
    { operationId: 'orders.create', method: 'post', path: '/v1/orders', request: 'CreateOrder', response: 'Order', idempotent: true },
    {
      operationId: 'orders.cancel',
      method: 'post',
      path: '/v1/orders/{id}/cancel',
      request: 'CancelOrder',
      response: 'Order',
      idempotent: true,
    },
    { operationId: 'orders.read', method: 'get', path: '/v1/orders/{id}', response: 'Order', idempotent: false },
    {
      operationId: 'idempotency-receipts.read',
      method: 'get',
      path: '/v1/idempotency-receipts/{operation}/{key}',
      response: 'Receipt',
      idempotent: false,
    },
  ],
  schemas: {
    CreateOrder: allKeys<CreateOrderFields>()('sku', 'quantity', 'customerRef'),
    CancelOrder: allKeys<CancelOrderFields>()('reason'),
    Order: allKeys<Order>()('id', 'sku', 'quantity', 'customerRef', 'status', 'createdAt', 'cancelledAt', 'cancelReason'),
    Receipt: allKeys<Receipt>()(
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
    ),
  } as Record<string, readonly string[]>,
  problemTypes: problemStatus as Record<string, number>,
} as const;

/**
 * Compares this client with a service's OpenAPI document (the command API serves it at
 * `/docs-json` on its management port) and lists every difference: a missing operation, a field the
 * client would not send or read, a problem type it does not know. Empty when they agree.
 */
export function checkContract(doc: any): string[] {
  const drift: string[] = [];
  const schema = (ref: string | undefined) => (ref ? doc.components?.schemas?.[ref.replace('#/components/schemas/', '')] : undefined);
  const fields = (found: any) => Object.keys(found?.properties ?? {}).sort();
  for (const expected of clientContract.operations) {
    const operation = doc.paths?.[expected.path]?.[expected.method];
    if (!operation) {
      drift.push(`${expected.method.toUpperCase()} ${expected.path} is not in the document`);
      continue;
    }
    const name = `${expected.method.toUpperCase()} ${expected.path}`;
    if (operation.operationId !== expected.operationId)
      drift.push(`${name}: operationId ${operation.operationId}, client expects ${expected.operationId}`);
    const takesKey = (operation.parameters ?? []).some((p: any) => p.in === 'header' && p.name === 'Idempotency-Key');
    if (takesKey !== expected.idempotent) drift.push(`${name}: Idempotency-Key ${takesKey ? 'documented' : 'not documented'}`);
    if ('request' in expected) {
      const body = schema(operation.requestBody?.content?.['application/json']?.schema?.$ref);
      compare(drift, `${name} request body`, fields(body), clientContract.schemas[expected.request]);
    }
    const success = Object.entries(operation.responses ?? {}).find(([status]) => status.startsWith('2'))?.[1] as any;
    const response = schema(success?.content?.['application/json']?.schema?.$ref);
    compare(drift, `${name} response`, fields(response), clientContract.schemas[expected.response]);
  }
  const documented: Record<string, { status: number }> = doc['x-problem-types'] ?? {};
  compare(drift, 'problem types', Object.keys(documented).sort(), Object.keys(clientContract.problemTypes));
  for (const [type, { status }] of Object.entries(documented)) {
    const known = clientContract.problemTypes[type];
    if (known !== undefined && known !== status) drift.push(`problem type ${type}: status ${status}, client expects ${known}`);
  }
  return drift;
}

function compare(drift: string[], what: string, documented: readonly string[], client: readonly string[]) {
  const missing = documented.filter((field) => !client.includes(field));
  const extra = client.filter((field) => !documented.includes(field));
  if (missing.length) drift.push(`${what}: documented but unknown to the client: ${missing.join(', ')}`);
  if (extra.length) drift.push(`${what}: expected by the client but not documented: ${extra.join(', ')}`);
}
