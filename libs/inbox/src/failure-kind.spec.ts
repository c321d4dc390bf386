import { DatabaseError } from 'pg';
import { QueryFailedError, QueryRunnerAlreadyReleasedError, QueryRunnerProviderAlreadyReleasedError } from 'typeorm';
import { failureKind, fromHandler } from './failure-kind';
import { MalformedMessage } from './inbox-message';

function sqlError(code: string): QueryFailedError {
  const driverError = new DatabaseError('server error', 12, 'error');
  driverError.code = code;
  return new QueryFailedError('INSERT …', [], driverError);
}
const refused = () => Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:443'), { code: 'ECONNREFUSED' });

describe('what a consumer does about a failure', () => {
  const cases = [
    ['the connection to PostgreSQL is lost', sqlError('57P01'), 'unreachable'],
    ['PostgreSQL refuses connections', refused(), 'unreachable'],
    ['the runner was released after its connection errored', new QueryRunnerAlreadyReleasedError(), 'unreachable'],
    ['disk full', sqlError('53100'), 'unreachable'],
    ['statement timeout', sqlError('57014'), 'counted'],
    ['deadlock', sqlError('40P01'), 'counted'],
    ['out of memory', sqlError('53200'), 'counted'],
    ['check violation', sqlError('23514'), 'counted'],
    ['a webhook 5xx', new Error('webhook answered 503'), 'counted'],
    ['a payload it cannot read', new MalformedMessage('payload is not JSON'), 'malformed'],
  ] as const;
  it.each(cases.map(([what, error, kind]) => ({ what, error, kind })))('$what: $kind', ({ error, kind }) => {
    expect(failureKind(error)).toBe(kind);
  });

  it("a handler's own outside call refused is counted, though it looks like a lost connection", () => {
    expect(failureKind(fromHandler(refused()))).toBe('counted');
    expect(failureKind(fromHandler(new Error('Connection terminated unexpectedly')))).toBe('counted');
  });

  it("what a handler's statements on its manager throw keeps its kind", () => {
    for (const error of [
      sqlError('57P01'),
      new QueryRunnerAlreadyReleasedError(),
      new QueryRunnerProviderAlreadyReleasedError(),
      sqlError('57014'),
      new MalformedMessage('x'),
    ]) {
      expect(fromHandler(error)).toBe(error);
    }
  });
});
