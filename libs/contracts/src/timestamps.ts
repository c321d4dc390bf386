import { z } from 'zod';

/** Every timestamp the service accepts and emits (event payloads, webhook bodies): documented in docs/notifier.md. */
export const TIMESTAMP_RULE = 'must be an RFC 3339 date-time with its offset, e.g. 2026-01-31T08:00:00.000Z';

/**
 * RFC 3339's `date-time` (what OpenAPI's `date-time` means), upper-case T and Z as `toISOString` writes
 * them: zod's ISO date-time with an offset, which also holds the date to the calendar (no February 30th,
 * no 24:00, no leap second). `Date.parse` alone forgives far more ("2024-01-01\u0000", "1",
 * "Mon, 01 Jan 2024"), and what it forgives then reaches a database or a receiver.
 */
export const timestampSchema = z.iso.datetime({ offset: true, message: TIMESTAMP_RULE });

/** Whether `value` keeps TIMESTAMP_RULE. */
export function isTimestamp(value: string): boolean {
  return timestampSchema.safeParse(value).success;
}

/**
 * `value` as the service writes a timestamp (`toISOString`: UTC, milliseconds), when it keeps
 * TIMESTAMP_RULE and so does its UTC form (not so for an instant before year 0000 or after 9999 UTC);
 * otherwise undefined.
 */
export function canonicalTimestamp(value: unknown): string | undefined {
  if (typeof value !== 'string' || !isTimestamp(value)) return undefined;
  const utc = new Date(value);
  if (Number.isNaN(utc.getTime())) return undefined;
  const canonical = utc.toISOString();
  return isTimestamp(canonical) ? canonical : undefined;
}
