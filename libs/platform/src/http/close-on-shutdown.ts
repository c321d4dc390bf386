import type { IncomingMessage, Server, ServerResponse } from 'node:http';

/**
 * Node's `server.close()` (Nest's, after the shutdown hooks) ends only the keep-alive connections idle
 * at that instant. A client that keeps sending on one — a load balancer or proxy pooling its upstream
 * connections — would keep it, and the shutdown, open until SHUTDOWN_TIMEOUT_SECONDS, and then be cut.
 * From the first SIGTERM or SIGINT, every answer not yet begun carries `Connection: close`, so each
 * connection ends after the answer in flight on it and the client opens its next one elsewhere.
 */
export function closeConnectionsOnShutdown(server: Server): void {
  const inFlight = new Set<ServerResponse>();
  let closing = false;
  // One listener for every response, none made per request: this runs on every request's path.
  const answered = function (this: ServerResponse) {
    inFlight.delete(this);
  };
  // Ahead of Express, so that the header is set before any route can answer.
  server.prependListener('request', (_request: IncomingMessage, response: ServerResponse) => {
    if (closing) {
      response.setHeader('Connection', 'close');
      return;
    }
    inFlight.add(response);
    response.on('close', answered); // `on`: a response closes once, and `once` would wrap the listener per request
  });
  const close = () => {
    closing = true;
    for (const response of inFlight) if (!response.headersSent) response.setHeader('Connection', 'close');
    inFlight.clear();
  };
  process.once('SIGTERM', close);
  process.once('SIGINT', close);
}
