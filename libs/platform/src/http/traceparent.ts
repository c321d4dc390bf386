import { randomBytes } from 'node:crypto';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * A W3C `traceparent` for work done on behalf of a request: a child span of the caller's trace when
 * it sent a valid one, otherwise a new sampled trace.
 */
export function childTraceparent(incoming: string | undefined): string {
  const match = TRACEPARENT.exec(incoming ?? '');
  const traceId = match && !/^0+$/.test(match[1]) ? match[1] : randomBytes(16).toString('hex');
  const flags = match ? match[3] : '01';
  return `00-${traceId}-${randomBytes(8).toString('hex')}-${flags}`;
}
