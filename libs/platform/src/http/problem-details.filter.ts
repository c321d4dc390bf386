import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { STATUS_CODES } from 'node:http';
import { Problem, PROBLEM_CONTENT_TYPE, ProblemException, problemType } from './problem';

/** Renders every error as application/problem+json (RFC 9457); unexpected errors never leak internals. */
@Catch()
export class ProblemDetailsFilter implements ExceptionFilter {
  private readonly logger = new Logger(ProblemDetailsFilter.name);

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const request = http.getRequest<Request>();
    const response = http.getResponse<Response>();
    const { problem, headers } = this.toProblem(exception);
    if (problem.status >= 500 && !(exception instanceof ProblemException)) {
      this.logger.error({ err: exception, url: request.originalUrl }, 'unhandled error');
    }
    response
      .status(problem.status)
      .set({ ...headers, 'Content-Type': PROBLEM_CONTENT_TYPE })
      .send(JSON.stringify({ ...problem, instance: problem.instance ?? request.originalUrl }));
  }

  private toProblem(exception: unknown): { problem: Problem; headers: Record<string, string> } {
    if (exception instanceof ProblemException) {
      return { problem: exception.problem, headers: exception.headers };
    }
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

function httpProblem(status: number, detail: string): Problem {
  const title = STATUS_CODES[status] ?? 'Error';
  return { type: problemType(title.toLowerCase().replace(/[^a-z0-9]+/g, '-')), title, status, detail };
}
