import { DatabaseError } from 'pg';
import { QueryFailedError } from 'typeorm';
import { ConfigService } from '@nestjs/config';
import { serializeError } from './error-serializer';
import { loggingModule } from './logging.module';

function uniqueViolation(): DatabaseError {
  const error = new DatabaseError('duplicate key value violates unique constraint "orders_customer_ref"', 1, 'error');
  Object.assign(error, {
    code: '23505',
    constraint: 'orders_customer_ref',
    detail: 'Key (tenant_id, customer_ref)=(acme, ref-secret) already exists.',
  });
  return error;
}

describe('serializeError (the err field of every log line)', () => {
  it('keeps the diagnosis of a TypeORM query error and drops its parameters and the conflicting values', () => {
    const failed = new QueryFailedError(
      'INSERT INTO orders (tenant_id, customer_ref) VALUES ($1, $2)',
      ['acme', 'ref-secret'],
      uniqueViolation(),
    );
    const logged = serializeError(failed) as Record<string, any>;
    expect(logged).toMatchObject({
      type: 'QueryFailedError',
      code: '23505',
      constraint: 'orders_customer_ref',
      query: 'INSERT INTO orders (tenant_id, customer_ref) VALUES ($1, $2)',
      message: expect.stringContaining('orders_customer_ref'),
      driverError: { code: '23505' },
    });
    expect(JSON.stringify(logged)).not.toMatch(/ref-secret|acme/);
  });

  it("drops PostgreSQL's statement context and internal query too, which quote values", () => {
    const inFunction = Object.assign(uniqueViolation(), {
      where: "PL/pgSQL function e(text) line 3 at SQL statement, with tenant_id = 'acme'",
      internalQuery: "INSERT INTO orders VALUES ('acme', 'ref-secret')",
    });
    const logged = serializeError(inFunction) as Record<string, unknown>;
    expect(logged).toMatchObject({ code: '23505', constraint: 'orders_customer_ref' });
    expect(logged).not.toHaveProperty('where');
    expect(logged).not.toHaveProperty('internalQuery');
    expect(JSON.stringify(logged)).not.toMatch(/ref-secret|acme/);
  });

  it('scrubs causes and aggregated errors too, and leaves ordinary errors as pino logs them', () => {
    const wrapped = new Error('command failed', { cause: uniqueViolation() });
    expect(JSON.stringify(serializeError(wrapped))).not.toMatch(/ref-secret/);
    expect(JSON.stringify(serializeError(new AggregateError([uniqueViolation()], 'all failed')))).not.toMatch(/ref-secret/);
    expect(serializeError(new TypeError('boom'))).toMatchObject({
      type: 'TypeError',
      message: 'boom',
      stack: expect.stringContaining('TypeError'),
    });
  });
});

describe('loggingModule', () => {
  it("logs every app's errors through serializeError", async () => {
    const module = loggingModule('any-app') as unknown as { providers: { useFactory?: (config: ConfigService) => Promise<any> | any }[] };
    const factory = module.providers.find((provider) => provider.useFactory)!.useFactory!;
    const params = await factory(new ConfigService({ LOG_LEVEL: 'info' }));
    expect(params.pinoHttp.serializers.err).toBe(serializeError);
  });
});
