import { createHash, randomBytes } from 'node:crypto';

const PREFIX = 'ik_';
const KEY_SHAPE = /^ik_[A-Za-z0-9_-]{43}$/;

/** A new random 32-byte key, shown to the operator once; only its SHA-256 is stored. */
export function generateApiKey(): { apiKey: string; sha256: Buffer } {
  const apiKey = PREFIX + randomBytes(32).toString('base64url');
  return { apiKey, sha256: hashApiKey(apiKey) };
}

export function hashApiKey(apiKey: string): Buffer {
  return createHash('sha256').update(apiKey, 'utf8').digest();
}

/** The key in `Authorization: Bearer <key>`, or undefined when the header is missing or malformed. */
export function bearerKey(authorization: string | undefined): string | undefined {
  const match = /^Bearer ([^\s]+)$/i.exec(authorization ?? '');
  return match && KEY_SHAPE.test(match[1]) ? match[1] : undefined;
}
