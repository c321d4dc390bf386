import { randomFillSync } from 'node:crypto';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * A W3C `traceparent` for work done on behalf of a request: a child span of the caller's trace when
 * it sent a valid one, otherwise a new sampled trace.
 */
export function childTraceparent(incoming: string | undefined): string {
  const match = TRACEPARENT.exec(incoming ?? '');
  const traceId = match && !/^0+$/.test(match[1]) ? match[1] : randomHex(16);
  const flags = match ? match[3] : '01';
  return `00-${traceId}-${randomHex(8)}-${flags}`;
}

// Random bytes drawn a few KiB at a time, as crypto.randomUUID does: one call into the CSPRNG per ~170 requests, not two per request.
const entropy = Buffer.alloc(4096);
let used = entropy.length;

function randomHex(bytes: number): string {
  if (used + bytes > entropy.length) {
    randomFillSync(entropy);
    used = 0;
  }
  used += bytes;
  return entropy.toString('hex', used - bytes, used);
}
