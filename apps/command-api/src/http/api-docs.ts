import { applyDecorators } from '@nestjs/common';
import { ApiBearerAuth, ApiProperty, ApiPropertyOptional, ApiResponse } from '@nestjs/swagger';

/** RFC 9457 problem document, as every error is sent (`application/problem+json`). */
export class ProblemDoc {
  @ApiProperty({ example: '/problems/idempotency-key-reused' }) type: string;
  @ApiProperty() title: string;
  @ApiProperty() status: number;
  @ApiPropertyOptional() detail?: string;
  @ApiPropertyOptional() instance?: string;
  @ApiPropertyOptional({ description: 'Stable error code, e.g. IDEMPOTENCY.KEY_REUSED' }) code?: string;
}

/** The 422 of an idempotent command: its key reused with other fields, or refused by a tombstone after its expiry. */
class IdempotencyKeyProblemDoc extends ProblemDoc {
  @ApiPropertyOptional({ format: 'date-time', description: '/problems/idempotency-key-expired only: when the receipt of the key expired.' })
  expiredAt?: string;
  @ApiPropertyOptional({
    format: 'date-time',
    description: '/problems/idempotency-key-expired only: until when the key is refused; after it the key runs as a new request.',
  })
  tombstoneUntil?: string;
}

const problem = (
  status: number,
  description: string,
  headers?: Record<string, { description: string; schema: object }>,
  type: typeof ProblemDoc = ProblemDoc,
) => ApiResponse({ status, description, type, headers });

export const retryAfter = { 'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } } };
const wwwAuthenticate = { 'WWW-Authenticate': { description: 'Bearer', schema: { type: 'string' } } };
const rateLimit = {
  ...retryAfter,
  'RateLimit-Policy': {
    description:
      'The client\'s budget (IETF draft-ietf-httpapi-ratelimit-headers): `"client";q=<requests>;w=<seconds>`. On every authenticated answer.',
    schema: { type: 'string' },
  },
  RateLimit: {
    description: 'What is left of it: `"client";r=<remaining>;t=<seconds until the window ends>`. On every authenticated answer.',
    schema: { type: 'string' },
  },
};

/** On every response the receipt stores (successes and domain outcomes such as 404, 409), first or replayed. */
export const idempotencyHeaders = {
  'Idempotency-Expires': {
    description: 'HTTP date after which this key is forgotten: the same key then runs as a new request.',
    schema: { type: 'string' },
  },
  'Idempotent-Replayed': {
    description: '"true" when this is the stored response of an earlier request with the same key and fields.',
    schema: { type: 'string', enum: ['true'] },
  },
};

/** The responses every authenticated route can give. */
export const ApiAuthenticatedResponses = () =>
  applyDecorators(
    ApiBearerAuth(),
    problem(401, 'Missing, unknown or revoked API key (checked before anything else).', wwwAuthenticate),
    problem(403, 'The client is not allowed this operation.'),
    problem(
      429,
      "Over budget: this client's requests per window, or (before any lookup) requests with a missing or invalid key from " +
        'this address. Nothing was done; retry after Retry-After seconds. Budgets count per API instance.',
      rateLimit,
    ),
    problem(503, 'The database did not answer. Retry later; nothing is reported as done.', retryAfter),
    problem(
      500,
      'An unexpected failure; the details are in the server log under this X-Request-Id. A command retried with ' +
        'the same Idempotency-Key replays its result if it committed, and runs otherwise.',
    ),
  );

/** The responses every idempotent command can give, besides its own success and domain outcomes. */
export const ApiCommandResponses = () =>
  applyDecorators(
    ApiAuthenticatedResponses(),
    problem(400, 'Invalid body, fields or Idempotency-Key. Nothing is stored; the key stays unused.'),
    problem(409, 'A request with the same key is still in progress (waited IDEMPOTENCY_LOCK_TIMEOUT_MS).', retryAfter),
    problem(413, 'Body over 16 KiB. Nothing is stored.'),
    problem(415, 'Body is not application/json. Nothing is stored.'),
    problem(
      422,
      '`/problems/idempotency-key-reused`: the key was already used with different fields in this scope. ' +
        '`/problems/idempotency-key-expired`: the receipt of the key expired and the operation keeps a tombstone ' +
        '(IDEMPOTENCY_TOMBSTONE_SECONDS_<OPERATION> above 0): until `tombstoneUntil` every request with the key is refused, ' +
        'whatever its fields, with `expiredAt` and `tombstoneUntil`; the action it named may have happened (read the ' +
        'receipt or the order), a new action needs a new key. Nothing changes.',
      undefined,
      IdempotencyKeyProblemDoc,
    ),
  );
