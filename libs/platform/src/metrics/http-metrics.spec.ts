import type { Request } from 'express';
import { routeLabel } from './http-metrics';

const request = (route: unknown, baseUrl = '') => ({ route, baseUrl }) as unknown as Request;

describe('routeLabel', () => {
  it('is the route template, never the raw URL', () => {
    expect(routeLabel(request({ path: '/v1/orders/:id/cancel' }))).toBe('/v1/orders/:id/cancel');
    expect(routeLabel(request({ path: '/:id' }, '/v1/orders'))).toBe('/v1/orders/:id');
  });

  it('is "unmatched" when no route of the app took the request', () => {
    expect(routeLabel(request(undefined))).toBe('unmatched');
    // Only the catch-all path Nest mounts middleware on (the request logger) matched.
    expect(routeLabel(request({ path: '/{*path}' }))).toBe('unmatched');
  });
});
