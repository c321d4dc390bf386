import { hash } from 'node:crypto';
import canonicalize from 'canonicalize';

export type SemanticValue = string | number | boolean | null;

/** The fields an operation's contract declares as the meaning of a request (not the raw HTTP body). */
export type SemanticFields = Record<string, SemanticValue>;

export interface Fingerprint {
  version: number;
  value: string;
}

/**
 * Fingerprint functions by version. A receipt is compared with the version it was stored under,
 * so a new version never turns an honest retry into a conflict.
 */
const versions: Record<number, (fields: SemanticFields) => string> = {
  // v1: SHA-256 (hex) of the RFC 8785 canonical JSON of the declared fields.
  1: (fields) => hash('sha256', canonicalize(fields)!, 'hex'),
};

export const CURRENT_FINGERPRINT_VERSION = 1;

export function fingerprint(fields: SemanticFields, version = CURRENT_FINGERPRINT_VERSION): Fingerprint {
  const compute = versions[version];
  if (!compute) throw new Error(`unknown fingerprint version ${version}`);
  return { version, value: compute(fields) };
}
