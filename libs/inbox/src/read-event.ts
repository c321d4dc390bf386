import type { z } from 'zod';
import { Headers } from '@app/contracts';
import { InboxMessage, MalformedMessage } from './inbox-message';

/** The events a consumer reads: a zod schema per event type, and the newest version it understands. */
export interface EventContract<S extends Record<string, z.ZodType> = Record<string, z.ZodType>> {
  schemas: S;
  version: number;
}

/** A message read as one of the contract's events, its payload checked by the type's schema. */
export type ConsumedEvent<S extends Record<string, z.ZodType>> = {
  [T in keyof S & string]: { type: T; messageId: string; event: z.output<S[T]>; message: InboxMessage };
}[keyof S & string];

/** An `event-version` header: a positive integer, written as producers write it (no sign, no leading zero). */
const VERSION = /^[1-9][0-9]*$/;

/**
 * Reads `message` as an event of `contract`, or returns undefined when this consumer skips it: a type
 * it does not know or a version newer than it reads (forward compatible: a producer may add types and
 * versions first). A known type whose `event-version` is not a version number, or whose payload is not
 * JSON, fails its type's schema, or names another tenant than the `tenant-id` header, is malformed:
 * retrying cannot help, so it is dead-lettered at once.
 */
export function readEvent<S extends Record<string, z.ZodType>>(
  message: InboxMessage,
  contract: EventContract<S>,
): ConsumedEvent<S> | undefined {
  const type = message.eventType;
  if (type === undefined || !Object.hasOwn(contract.schemas, type)) return undefined;
  const versionHeader = message.headers[Headers.eventVersion] ?? '1';
  if (!VERSION.test(versionHeader)) throw new MalformedMessage(`event-version ${JSON.stringify(versionHeader)} is not a version number`);
  if (Number(versionHeader) > contract.version) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(message.value ?? '');
  } catch {
    throw new MalformedMessage('payload is not JSON');
  }
  const parsed = contract.schemas[type].safeParse(json);
  if (!parsed.success) {
    throw new MalformedMessage(
      `payload is not a ${type}: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'payload'} ${i.message}`).join('; ')}`,
    );
  }
  const event = parsed.data as { tenantId?: unknown };
  if (event && typeof event === 'object' && 'tenantId' in event && event.tenantId !== message.headers[Headers.tenantId]) {
    throw new MalformedMessage(`payload tenant ${String(event.tenantId)} does not match the tenant-id header`);
  }
  return { type, messageId: message.messageId!, event: parsed.data, message } as ConsumedEvent<S>;
}
