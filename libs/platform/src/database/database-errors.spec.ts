import { DatabaseError } from 'pg';
import { QueryFailedError, QueryRunnerAlreadyReleasedError, QueryRunnerProviderAlreadyReleasedError } from 'typeorm';
import { isDatabaseUnavailable, isDatabaseUnreachable } from './database-errors';

/** A server error as pg reports it, wrapped by TypeORM as a failed query. */
function sqlError(code: string, message = 'server error'): QueryFailedError {
  const driverError = new DatabaseError(message, message.length, 'error');
  driverError.code = code;
  return new QueryFailedError('SELECT 1', [], driverError);
}

/** A socket error as Node reports it while connecting. */
function socketError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code });
}

// [what, error, unreachable (waited out, not counted), unavailable (HTTP 503)]
const cases: [string, unknown, boolean, boolean][] = [
  ['08006 connection failure', sqlError('08006'), true, true],
  ['08001 cannot establish connection', sqlError('08001'), true, true],
  ['57P01 admin shutdown / pg_terminate_backend', sqlError('57P01', 'terminating connection due to administrator command'), true, true],
  ['57P02 crash shutdown', sqlError('57P02'), true, true],
  ['57P03 cannot connect now', sqlError('57P03'), true, true],
  ['57P05 idle session timeout', sqlError('57P05'), true, true],
  ['53100 disk full', sqlError('53100'), true, true],
  ['53300 too many connections', sqlError('53300'), true, true],
  ['53200 out of memory', sqlError('53200'), false, true],
  ['53400 configuration limit exceeded', sqlError('53400'), false, true],
  ['57014 statement timeout', sqlError('57014', 'canceling statement due to statement timeout'), false, true],
  ['55P03 lock timeout', sqlError('55P03'), false, true],
  ['40001 serialization failure', sqlError('40001'), false, true],
  ['40P01 deadlock', sqlError('40P01', 'deadlock detected'), false, true],
  ['25P04 transaction timeout', sqlError('25P04'), false, true],
  ['23514 check violation', sqlError('23514'), false, false],
  ['23505 unique violation', sqlError('23505'), false, false],
  ['42P01 undefined table', sqlError('42P01'), false, false],
  ['22P02 invalid text representation', sqlError('22P02'), false, false],
  ['ECONNREFUSED', socketError('ECONNREFUSED'), true, true],
  ['ECONNRESET', socketError('ECONNRESET'), true, true],
  ['ETIMEDOUT', socketError('ETIMEDOUT'), true, true],
  ['EPIPE', socketError('EPIPE'), true, true],
  ['ENOTFOUND', socketError('ENOTFOUND'), true, true],
  ['EHOSTUNREACH', socketError('EHOSTUNREACH'), true, true],
  ['EAI_AGAIN', socketError('EAI_AGAIN'), true, true],
  ['connection dropped mid-query', new QueryFailedError('SELECT 1', [], new Error('Connection terminated unexpectedly')), true, true],
  ['pool connect timeout', new Error('timeout exceeded when trying to connect'), true, true],
  ['client broken by an earlier error', new Error('Client has encountered a connection error and is not queryable'), true, true],
  ['runner released after its connection errored', new QueryRunnerAlreadyReleasedError(), true, true],
  ['manager of a runner released after its connection errored', new QueryRunnerProviderAlreadyReleasedError(), true, true],
  ['localhost refused on every address', new AggregateError([socketError('ECONNREFUSED'), socketError('ECONNREFUSED')]), true, true],
  ['a handler bug', new TypeError("Cannot read properties of undefined (reading 'id')"), false, false],
  ['not an error', 'ECONNREFUSED', false, false],
  ['nothing', undefined, false, false],
];

describe('database error classification', () => {
  const table = cases.map(([what, error, unreachable, unavailable]) => ({ what, error, unreachable, unavailable }));
  it.each(table)('$what: unreachable $unreachable, unavailable $unavailable', ({ error, unreachable, unavailable }) => {
    expect([isDatabaseUnreachable(error), isDatabaseUnavailable(error)]).toEqual([unreachable, unavailable]);
  });

  it('everything unreachable is also unavailable (the HTTP mapping never gets narrower)', () => {
    for (const [, error] of cases) if (isDatabaseUnreachable(error)) expect(isDatabaseUnavailable(error)).toBe(true);
  });
});
