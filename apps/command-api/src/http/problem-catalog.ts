import { IdempotencyError, IdempotencyErrorCode, StoredResponse } from '@app/idempotency';
import { platformProblemTypes, PROBLEM_CONTENT_TYPE, ProblemException, ProblemMapper, problemType } from '@app/platform';

/** Every error code the command API answers with, and the problem it becomes. One table, one place. */
const catalog = {
  'AUTH.UNAUTHENTICATED': { status: 401, slug: 'unauthenticated', title: 'Missing or invalid credentials' },
  'AUTH.FORBIDDEN': { status: 403, slug: 'forbidden', title: 'Operation not allowed for this client' },
  'REQUEST.INVALID': { status: 400, slug: 'invalid-request', title: 'Invalid request' },
  'REQUEST.TOO_LARGE': { status: 413, slug: 'request-too-large', title: 'Request body too large' },
  'REQUEST.UNSUPPORTED_MEDIA_TYPE': { status: 415, slug: 'unsupported-media-type', title: 'Unsupported media type' },
  'REQUEST.RATE_LIMITED': { status: 429, slug: 'rate-limited', title: 'Too many requests' },
  'IDEMPOTENCY.KEY_REUSED': { status: 422, slug: 'idempotency-key-reused', title: 'Idempotency key reused' },
  'IDEMPOTENCY.IN_PROGRESS': { status: 409, slug: 'idempotency-request-in-progress', title: 'Request in progress' },
  'IDEMPOTENCY.KEY_EXPIRED': { status: 422, slug: 'idempotency-key-expired', title: 'Idempotency key expired' },
  'ORDER.NOT_FOUND': { status: 404, slug: 'order-not-found', title: 'Order not found' },
  'ORDER.ALREADY_CANCELLED': { status: 409, slug: 'order-already-cancelled', title: 'Order already cancelled' },
  'ORDER.CUSTOMER_REF_USED': { status: 409, slug: 'customer-ref-already-used', title: 'Customer reference already used' },
  'RECEIPT.NOT_FOUND': { status: 404, slug: 'receipt-not-found', title: 'No receipt for this scope' },
  'FAULT.INJECTED': { status: 500, slug: 'injected-fault', title: 'Injected fault' },
} as const;

export type ProblemCode = keyof typeof catalog;

const retryAfter: Partial<Record<ProblemCode, string>> = { 'IDEMPOTENCY.IN_PROGRESS': '1' };

export function problemException(
  code: ProblemCode,
  detail: string,
  extensions: Record<string, unknown> = {},
  extraHeaders: Record<string, string> = {},
) {
  const { status, slug, title } = catalog[code];
  const headers: Record<string, string> = { ...(retryAfter[code] && { 'Retry-After': retryAfter[code] }), ...extraHeaders };
  if (code === 'AUTH.UNAUTHENTICATED') headers['WWW-Authenticate'] = 'Bearer';
  return new ProblemException({ type: problemType(slug), title, status, detail, code, ...extensions }, headers);
}

/** A domain outcome decided inside the transaction, as the response the receipt stores and replays. */
export function problemResponse(code: ProblemCode, detail: string, extensions: Record<string, unknown> = {}): StoredResponse {
  const { problem } = problemException(code, detail, extensions);
  return { status: problem.status, headers: { 'Content-Type': PROBLEM_CONTENT_TYPE }, body: problem };
}

/**
 * Every problem type the API's operations answer with, its status and title, published in the OpenAPI
 * document as `x-problem-types` so that clients (libs/client checks itself against it) type errors by `type`.
 * The injected fault is left out: it exists only where a test turned fault injection on.
 */
export function documentedProblemTypes(): Record<string, { status: number; title: string }> {
  const types: Record<string, { status: number; title: string }> = { ...platformProblemTypes };
  for (const [code, { status, slug, title }] of Object.entries(catalog)) {
    if (code !== 'FAULT.INJECTED') types[problemType(slug)] = { status, title };
  }
  return types;
}

/** Thrown only where fault injection is enabled (never in production): proves a failure before commit leaves nothing. */
export class InjectedFault extends Error {}

export const commandApiProblems: ProblemMapper = (error) => {
  if (error instanceof IdempotencyError) return problemException(error.code satisfies IdempotencyErrorCode, error.message, error.details);
  if (error instanceof InjectedFault) return problemException('FAULT.INJECTED', error.message);
  return undefined;
};
