import { isAcceptableText } from '@app/contracts';

/**
 * What every JSON body must be before any field rule looks at it — checked once, for every field,
 * known or unknown, and every field name. Documented in docs/idempotency.md and the OpenAPI document.
 */

/** Deeper bodies are refused before they are parsed: nothing downstream recurses over hostile depth. */
export const MAX_JSON_DEPTH = 32;

export { TEXT_RULE } from '@app/contracts';

/** True when the raw JSON nests arrays and objects deeper than `max` (brackets inside strings do not count). */
export function nestsDeeperThan(json: Buffer, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const byte = json[i];
    if (inString) {
      if (byte === 0x5c)
        i++; // backslash: skip the escaped character
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) {
      inString = true;
    } else if (byte === 0x5b || byte === 0x7b) {
      if (++depth > max) return true;
    } else if (byte === 0x5d || byte === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** The path of the first field name or string value that breaks TEXT_RULE (`customerRef`, `x[2].y`), or undefined. */
export function firstUnacceptableText(value: unknown, path = ''): string | undefined {
  if (typeof value === 'string') return isAcceptableText(value) ? undefined : path || '(body)';
  if (typeof value !== 'object' || value === null) return undefined;
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = firstUnacceptableText(item, `${path}[${i}]`);
      if (found) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    const here = path ? `${path}.${key}` : key;
    if (!isAcceptableText(key)) return here;
    const found = firstUnacceptableText(item, here);
    if (found) return found;
  }
  return undefined;
}
