/**
 * PostgreSQL cannot store a NUL: `text` refuses it (22021) and `jsonb` refuses `\u0000` (22P05). A Kafka
 * message can carry one anywhere (value, key, header names and values), and what a consumer records
 * about a message it gave up on must still be storable, or recording it fails every time and its
 * partition never moves on. So:
 * - diagnostic text (an error, an event-type) is stored with each NUL as U+FFFD: read, never replayed;
 * - a message's content (key, value, headers) is stored faithfully, reversibly, so a re-drive publishes
 *   the same bytes: as it is when it holds no NUL (nearly always); otherwise every string of it escaped
 *   (`%` as `%25`, NUL as `%00`) and its headers stored as `{"escaped": …, "headers": {…}}`. A stored
 *   message's headers without NULs are all strings, so the `headers` object tells the two forms apart.
 */

/** What a re-drive republishes: a message's key, value and headers. */
export interface MessageContent {
  key: string | null;
  payload: string | null;
  headers: Record<string, string>;
}

/** The content as its columns hold it: `message_key`, `payload` (text) and `headers` (jsonb). */
export interface StoredContent {
  key: string | null;
  payload: string | null;
  headers: Record<string, string> | EscapedHeaders;
}

interface EscapedHeaders {
  escaped: typeof ESCAPED;
  headers: Record<string, string>;
}

const ESCAPED = 'every string of this message: % as %25, NUL as %00';

/** `text` with each NUL as U+FFFD, for text only read by people (errors, event types). */
export function diagnosticText(text: string): string;
export function diagnosticText(text: string | null): string | null;
export function diagnosticText(text: string | null): string | null {
  return text?.replaceAll('\u0000', '\ufffd') ?? null;
}

export function toStoredContent(content: MessageContent): StoredContent {
  const { key, payload, headers } = content;
  const strings = [key ?? '', payload ?? '', ...Object.entries(headers).flat()];
  if (!strings.some((text) => text.includes('\u0000'))) return content;
  return {
    key: key === null ? null : escape(key),
    payload: payload === null ? null : escape(payload),
    headers: { escaped: ESCAPED, headers: mapEntries(headers, escape) },
  };
}

export function fromStoredContent(stored: StoredContent): MessageContent {
  const { key, payload, headers } = stored;
  if (!isEscaped(headers)) return { key, payload, headers };
  return {
    key: key === null ? null : unescape(key),
    payload: payload === null ? null : unescape(payload),
    headers: mapEntries(headers.headers, unescape),
  };
}

function isEscaped(headers: StoredContent['headers']): headers is EscapedHeaders {
  return typeof headers.headers === 'object' && headers.headers !== null;
}

function escape(text: string): string {
  return text.replaceAll('%', '%25').replaceAll('\u0000', '%00');
}

function unescape(text: string): string {
  return text.replace(/%(25|00)/g, (_, code: string) => (code === '25' ? '%' : '\u0000'));
}

function mapEntries(record: Record<string, string>, map: (text: string) => string): Record<string, string> {
  return Object.fromEntries(Object.entries(record).map(([name, value]) => [map(name), map(value)]));
}
