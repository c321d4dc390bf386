import type { NextFunction, Request, Response } from 'express';
import { Counter, Histogram } from 'prom-client';

export const httpRequestDuration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP requests by method, route template and status code, from arrival to the last byte sent',
  labelNames: ['method', 'route', 'status_code'],
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
});

export const databaseUnavailableResponses = new Counter({
  name: 'http_database_unavailable_responses_total',
  help: '503 answers given because the database did not answer (lost connection, timeout, overload)',
  labelNames: ['method', 'route'],
});

/**
 * The route template the request matched (`/v1/orders/:id/cancel`), never the raw URL, so label
 * cardinality stays bounded; `unmatched` when no route took it (404s, scanners).
 */
export function routeLabel(req: Request): string {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  // Nest mounts a module's middleware for every path as the route `/{*path}`: a request that
  // reached only that matched no route of the app.
  if (typeof path !== 'string' || path.endsWith('{*path}')) return 'unmatched';
  return `${req.baseUrl ?? ''}${path}`;
}

/** Express middleware observing every request's duration once its response has been sent. */
export function observeHttpDuration(req: Request, res: Response, next: NextFunction): void {
  const end = httpRequestDuration.startTimer();
  res.once('finish', () => end({ method: req.method, route: routeLabel(req), status_code: String(res.statusCode) }));
  next();
}
