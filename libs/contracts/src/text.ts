/** Every string the service accepts and emits: documented in docs/idempotency.md and the OpenAPI document. */
export const TEXT_RULE = 'strings must be valid Unicode text (no unpaired surrogate) without NUL characters';

/** A NUL (PostgreSQL text cannot hold it) or a UTF-16 surrogate without its partner (not Unicode text). */
// eslint-disable-next-line no-control-regex -- NUL is exactly what this refuses
const UNACCEPTABLE_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whether `value` keeps TEXT_RULE. */
export function isAcceptableText(value: string): boolean {
  return !UNACCEPTABLE_TEXT.test(value);
}
