import { HttpException } from '@nestjs/common';

/** An RFC 9457 problem document. `type` is a URI reference; extension members ride along. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  [extension: string]: unknown;
}

export const PROBLEM_BASE = '/problems';
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** An HTTP failure that already knows its problem document (and any response headers, e.g. Retry-After). */
export class ProblemException extends HttpException {
  constructor(
    readonly problem: Problem,
    readonly headers: Record<string, string> = {},
  ) {
    super(problem, problem.status);
  }
}

export function problemType(slug: string): string {
  return `${PROBLEM_BASE}/${slug}`;
}
