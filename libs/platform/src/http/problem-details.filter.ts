import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { Logger as PinoLogger } from 'pino';
import { STATUS_CODES } from 'node:http';
import { isDatabaseUnavailable } from '../database/database-errors';
import { DEPENDENCY_UNAVAILABLE } from '../health/health.controller';
import { databaseUnavailableResponses, routeLabel } from '../metrics/http-metrics';
import { Problem, PROBLEM_CONTENT_TYPE, ProblemException, problemType } from './problem';

/** Turns an app's own error type into a problem, or returns undefined to let the next mapper try. */
export type ProblemMapper = (error: unknown) => ProblemException | undefined;

const SERVICE_UNAVAILABLE = problemType('service-unavailable');
const INTERNAL_ERROR = problemType('internal-server-error');

/**
 * The statuses HTTP itself answers with before any route's rules, each as `httpProblem` words it: a
 * request Node cannot parse (400), a head too large (431) or too slow (408), an `Expect` the server
 * cannot meet (417) (client-error.ts); a method and path no route takes (404), a path whose
 * percent-escapes do not decode (400) (Nest and Express).
 */
const PROTOCOL_STATUSES = [400, 404, 408, 417, 431];

/** The problems every HTTP app can answer besides its own catalog: for its OpenAPI document (`x-problem-types`). */
export const platformProblemTypes: Record<string, { status: number; title: string }> = {
  ...Object.fromEntries(
    PROTOCOL_STATUSES.map((status) => {
      const { type, title } = httpProblem(status, '');
      return [type, { status, title }];
    }),
  ),
  [SERVICE_UNAVAILABLE]: { status: 503, title: 'Service unavailable' },
  [INTERNAL_ERROR]: { status: 500, title: 'Internal Server Error' },
  [DEPENDENCY_UNAVAILABLE.type]: { status: DEPENDENCY_UNAVAILABLE.status, title: DEPENDENCY_UNAVAILABLE.title },
};

/** Any app: a database that cannot answer is a 503 to retry, never a "not found" and never a 500. */
export const databaseUnavailable: ProblemMapper = (error) =>
  isDatabaseUnavailable(error)
    ? new ProblemException(
        {
          type: SERVICE_UNAVAILABLE,
          title: 'Service unavailable',
          status: 503,
          detail:
            'The database did not answer in time. Nothing is reported as done: retry later; a command retried ' +
            'with the same Idempotency-Key replays its result if it did commit.',
        },
        { 'Retry-After': '2' },
      )
    : undefined;

/** Renders every error as application/problem+json (RFC 9457); unexpected errors never leak internals. */
@Catch()
export class ProblemDetailsFilter implements ExceptionFilter {
  private readonly logger = new Logger(ProblemDetailsFilter.name);

  constructor(private readonly mappers: ProblemMapper[] = []) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const request = http.getRequest<Request>();
    const response = http.getResponse<Response>();
    const { problem, headers } = this.toProblem(exception);
    if (problem.type === SERVICE_UNAVAILABLE) {
      databaseUnavailableResponses.inc({ method: request.method, route: routeLabel(request) });
    }
    if (problem.status >= 500) {
      // The request's own logger (`req.log` from logRequests: its lines carry the requestId) when it has one.
      const fields = { context: ProblemDetailsFilter.name, err: exception, url: request.originalUrl, problem: problem.type };
      const log = (request as { log?: PinoLogger }).log;
      if (log) log.error(fields, problem.title);
      else this.logger.error(fields, problem.title);
    }
    if (response.headersSent) return;
    response
      .status(problem.status)
      .set({ ...headers, 'Content-Type': PROBLEM_CONTENT_TYPE })
      .send(JSON.stringify({ ...problem, instance: problem.instance ?? request.originalUrl }));
  }

  private toProblem(exception: unknown): { problem: Problem; headers: Record<string, string> } {
    const mapped =
      exception instanceof ProblemException
        ? exception
        : [...this.mappers, databaseUnavailable].map((mapper) => mapper(exception)).find(Boolean);
    if (mapped) return { problem: mapped.problem, headers: mapped.headers };
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      const body = exception.getResponse();
      const message = typeof body === 'string' ? body : (body as { message?: unknown }).message;
      const detail = Array.isArray(message) ? message.join('; ') : String(message ?? exception.message);
      return { problem: httpProblem(status, detail), headers: {} };
    }
    return {
      problem: httpProblem(HttpStatus.INTERNAL_SERVER_ERROR, 'The server failed to process the request.'),
      headers: {},
    };
  }
}

export function httpProblem(status: number, detail: string): Problem {
  const title = STATUS_CODES[status] ?? 'Error';
  return { type: problemType(title.toLowerCase().replace(/[^a-z0-9]+/g, '-')), title, status, detail };
}
