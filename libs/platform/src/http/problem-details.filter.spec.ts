import { ArgumentsHost } from '@nestjs/common';
import { DatabaseError } from 'pg';
import { QueryFailedError } from 'typeorm';
import { ProblemDetailsFilter } from './problem-details.filter';

/** What the filter wrote: status, headers and the body it sent, and what the request's logger got. */
function handle(exception: unknown) {
  const sent: { status?: number; headers?: Record<string, string>; body?: string } = {};
  const logged: unknown[] = [];
  const request = {
    method: 'POST',
    originalUrl: '/v1/orders',
    route: { path: '/v1/orders' },
    log: { error: (fields: unknown) => logged.push(fields) },
  };
  const response = {
    headersSent: false,
    status(status: number) {
      sent.status = status;
      return this;
    },
    set(headers: Record<string, string>) {
      sent.headers = headers;
      return this;
    },
    send(body: string) {
      sent.body = body;
      return this;
    },
  };
  const host = { switchToHttp: () => ({ getRequest: () => request, getResponse: () => response }) } as unknown as ArgumentsHost;
  new ProblemDetailsFilter().catch(exception, host);
  return { ...sent, logged };
}

function queryFailed(): QueryFailedError {
  const driverError = Object.assign(new DatabaseError('new row violates check constraint "orders_quantity"', 1, 'error'), {
    code: '23514',
    detail: 'Failing row contains (acme, ref-secret, 0).',
    where: "SQL statement with tenant_id = 'acme'",
  });
  return new QueryFailedError('INSERT INTO orders (tenant_id, customer_ref) VALUES ($1, $2)', ['acme', 'ref-secret'], driverError);
}

describe('ProblemDetailsFilter: an error nothing maps', () => {
  it.each([
    ['a database error with its statement and values', queryFailed()],
    ['a bug with a message naming a value', new TypeError("Cannot read properties of undefined (reading 'ref-secret')")],
    ['something thrown that is not an Error', { acme: 'ref-secret' }],
  ])('%s: a 500 problem that says nothing of it; the log has it', (_, exception) => {
    const { status, headers, body, logged } = handle(exception);
    expect(status).toBe(500);
    expect(headers).toMatchObject({ 'Content-Type': expect.stringMatching(/^application\/problem\+json/) });
    expect(JSON.parse(body!)).toEqual({
      type: '/problems/internal-server-error',
      title: 'Internal Server Error',
      status: 500,
      detail: 'The server failed to process the request.',
      instance: '/v1/orders',
    });
    expect(body).not.toMatch(/acme|ref-secret|INSERT|orders_quantity|undefined/);
    expect(logged).toEqual([expect.objectContaining({ err: exception, url: '/v1/orders' })]);
  });
});
