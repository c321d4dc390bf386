/**
 * The problem types (RFC 9457 `type`) the command API answers with, each with its status. The server
 * lists the same table in its OpenAPI document (`x-problem-types`); a test in the server's suite fails
 * when the two differ, so this file cannot drift from what the service sends.
 */
export const ProblemTypes = {
  unauthenticated: '/problems/unauthenticated',
  forbidden: '/problems/forbidden',
  invalidRequest: '/problems/invalid-request',
  requestTooLarge: '/problems/request-too-large',
  unsupportedMediaType: '/problems/unsupported-media-type',
  rateLimited: '/problems/rate-limited',
  idempotencyKeyReused: '/problems/idempotency-key-reused',
  idempotencyKeyExpired: '/problems/idempotency-key-expired',
  requestInProgress: '/problems/idempotency-request-in-progress',
  orderNotFound: '/problems/order-not-found',
  orderAlreadyCancelled: '/problems/order-already-cancelled',
  customerRefAlreadyUsed: '/problems/customer-ref-already-used',
  receiptNotFound: '/problems/receipt-not-found',
  serviceUnavailable: '/problems/service-unavailable',
  internalServerError: '/problems/internal-server-error',
  // HTTP's own, answered before any route's rules: not sent to a request this client builds.
  badRequest: '/problems/bad-request',
  notFound: '/problems/not-found',
  requestTimeout: '/problems/request-timeout',
  expectationFailed: '/problems/expectation-failed',
  requestHeaderFieldsTooLarge: '/problems/request-header-fields-too-large',
  // GET /health/ready's, for load balancers: not an answer to this client's calls.
  dependencyUnavailable: '/problems/dependency-unavailable',
} as const;

export type ProblemType = (typeof ProblemTypes)[keyof typeof ProblemTypes];

/** The status each problem type comes with. */
export const problemStatus: Record<ProblemType, number> = {
  [ProblemTypes.unauthenticated]: 401,
  [ProblemTypes.forbidden]: 403,
  [ProblemTypes.invalidRequest]: 400,
  [ProblemTypes.requestTooLarge]: 413,
  [ProblemTypes.unsupportedMediaType]: 415,
  [ProblemTypes.rateLimited]: 429,
  [ProblemTypes.idempotencyKeyReused]: 422,
  [ProblemTypes.idempotencyKeyExpired]: 422,
  [ProblemTypes.requestInProgress]: 409,
  [ProblemTypes.orderNotFound]: 404,
  [ProblemTypes.orderAlreadyCancelled]: 409,
  [ProblemTypes.customerRefAlreadyUsed]: 409,
  [ProblemTypes.receiptNotFound]: 404,
  [ProblemTypes.serviceUnavailable]: 503,
  [ProblemTypes.internalServerError]: 500,
  [ProblemTypes.badRequest]: 400,
  [ProblemTypes.notFound]: 404,
  [ProblemTypes.requestTimeout]: 408,
  [ProblemTypes.expectationFailed]: 417,
  [ProblemTypes.requestHeaderFieldsTooLarge]: 431,
  [ProblemTypes.dependencyUnavailable]: 503,
};

/** An RFC 9457 problem document as the service sends it; extension members ride along. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  /** The service's stable error code, e.g. IDEMPOTENCY.KEY_REUSED. */
  code?: string;
  [extension: string]: unknown;
}
