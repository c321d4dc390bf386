/**
 * Who may have done this action before: the authenticated tenant, the stable operation id and the
 * client's key, kept as separate values end to end (never one concatenated string). The tenant
 * comes from the credential only.
 */
export interface IdempotencyScope {
  tenantId: string;
  operation: string;
  key: string;
}

/** 1–255 visible ASCII characters (0x21–0x7E): no spaces, no control characters, nothing to normalise. */
const KEY = /^[\x21-\x7E]{1,255}$/;

export function isValidIdempotencyKey(value: unknown): value is string {
  return typeof value === 'string' && KEY.test(value);
}
