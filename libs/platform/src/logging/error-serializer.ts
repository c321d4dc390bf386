import { stdSerializers } from 'pino';

/**
 * Fields of database errors that carry data rather than a diagnosis: TypeORM's `parameters` (a
 * statement's values: tenant, idempotency key, customerRef, reason, hashes), PostgreSQL's `detail`
 * ("Key (tenant_id, customer_ref)=(acme, ref-1) already exists") and `where` (the statement context).
 * The SQL text (`query`), SQLSTATE (`code`), `constraint`, `table` and the message stay: enough to
 * diagnose, nothing a client sent.
 */
const DATA_FIELDS = ['parameters', 'detail', 'where', 'internalQuery'];

type Serialized = Record<string, unknown>;

/** pino's error serializer, with the data fields of database errors left out, also in nested causes. */
export function serializeError(error: unknown): unknown {
  const serialized = stdSerializers.err(error as Error) as unknown;
  return scrub(serialized, 0);
}

function scrub(value: unknown, depth: number): unknown {
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((item) => scrub(item, depth + 1));
  const copy: Serialized = {};
  for (const [key, field] of Object.entries(value as Serialized)) {
    if (!DATA_FIELDS.includes(key)) copy[key] = scrub(field, depth + 1);
  }
  return copy;
}
