/**
 * The one id rule, for every place an id enters (HTTP path, operator command, Kafka message): a UUID in
 * its 8-4-4-4-12 hex form, any letter case, nothing else (no braces, no `urn:uuid:`, no missing hyphens,
 * no padding, though PostgreSQL's uuid input takes some of those). Both cases are written out rather
 * than flagged `i`, so the same source serves JavaScript, PostgreSQL (`~`) and OpenAPI `pattern`.
 */
export const UUID_PATTERN = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/;

/** A UUID in its canonical spelling (lower case), as everything this project writes carries it. */
export const CANONICAL_UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The canonical spelling of a UUID, lower case (as PostgreSQL prints a uuid), or undefined for text
 * that is not one. Two spellings of one id are two Kafka keys, two fingerprints, two replay
 * selections: whatever an id is used for downstream is this form, best read back from the row.
 */
export function canonicalUuid(text: unknown): string | undefined {
  return typeof text === 'string' && UUID_PATTERN.test(text) ? text.toLowerCase() : undefined;
}
