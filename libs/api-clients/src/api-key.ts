import { hash, randomBytes } from 'node:crypto';

const PREFIX = 'ik_';
const KEY_SHAPE = /^ik_[A-Za-z0-9_-]{43}$/;

/** A new random 32-byte key, shown to the operator once; only its SHA-256 is stored. */
export function generateApiKey(): { apiKey: string; sha256: Buffer } {
  const apiKey = PREFIX + randomBytes(32).toString('base64url');
  return { apiKey, sha256: hashApiKey(apiKey) };
}

/** SHA-256 of the key's UTF-8 bytes (one call, no Hash object: this runs on every request). */
export function hashApiKey(apiKey: string): Buffer {
  return hash('sha256', apiKey, 'buffer');
}

/** The key in `Authorization: Bearer <key>`, or undefined when the header is missing or malformed. */
export function bearerKey(authorization: string | undefined): string | undefined {
  const match = /^Bearer ([^\s]+)$/i.exec(authorization ?? '');
  return match && KEY_SHAPE.test(match[1]) ? match[1] : undefined;
}
