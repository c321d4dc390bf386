import { QueryFailedError } from 'typeorm';

/** SQLSTATE classes and codes meaning "the database could not answer now", never "not found". */
const UNAVAILABLE_SQLSTATE = [
  /^08/, // connection exception
  /^53/, // insufficient resources (too many connections, disk full)
  /^57P0[1-3]/, // admin shutdown, crash shutdown, cannot connect now
  /^57014$/, // query_canceled: statement_timeout
  /^55P03$/, // lock_not_available: lock_timeout
  /^40001$/, // serialization_failure
  /^40P01$/, // deadlock_detected
  /^25P04$/, // transaction_timeout
];
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN']);
const UNAVAILABLE_MESSAGES = /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection is not established|terminating connection/i;

export function sqlState(error: unknown): string | undefined {
  const candidate = error instanceof QueryFailedError ? error.driverError : error;
  const code = (candidate as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * True when `error` says the database was unreachable, overloaded, timed out or lost the connection:
 * the outcome of the statement is unknown or it did not run, and a retry later is the answer.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  const code = sqlState(error);
  if (code && (UNAVAILABLE_NODE_CODES.has(code) || UNAVAILABLE_SQLSTATE.some((pattern) => pattern.test(code)))) {
    return true;
  }
  const message = error instanceof Error ? error.message : '';
  return UNAVAILABLE_MESSAGES.test(message) || (error instanceof AggregateError && error.errors.some(isDatabaseUnavailable));
}
