import { IncomingMessage, STATUS_CODES, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { PROBLEM_CONTENT_TYPE } from './problem';
import { httpProblem } from './problem-details.filter';

/** What Node's HTTP parser answers before any app code runs, by its error code (Node's own defaults). */
const STATUS_BY_CODE: Record<string, number> = { HPE_HEADER_OVERFLOW: 431, ERR_HTTP_REQUEST_TIMEOUT: 408 };

/**
 * What Node answers itself, before any route runs, in the shape of every other error of the service
 * (problem+json, its type among the documented ones: `platformProblemTypes`):
 * - a request its HTTP parser refuses (a control character in a header, an oversized head, a broken
 *   request line), which Node would answer with a bare `400` (or `431`, `408`) and no body;
 * - an `Expect` other than `100-continue`, which Node would answer with a bare `417`.
 */
export function answerProtocolErrorsAsProblems(server: Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const status = STATUS_BY_CODE[error.code ?? ''] ?? 400;
    const body = JSON.stringify(httpProblem(status, `The request could not be parsed as HTTP/1.1 (${error.code ?? 'parse error'}).`));
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  // With a listener, Node hands such a request here instead of answering it (`100-continue` never comes here).
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    const detail = `Expect: ${request.headers.expect} cannot be met: this server only understands Expect: 100-continue.`;
    const body = JSON.stringify({ ...httpProblem(417, detail), instance: request.url });
    response.writeHead(417, { 'Content-Type': PROBLEM_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
    response.end(body);
  });
}

/** How long a request may take to arrive: its head, then the whole of it (`envFields.httpTimeouts`). */
export interface ArrivalBounds {
  HTTP_HEADERS_TIMEOUT_SECONDS: number;
  HTTP_REQUEST_TIMEOUT_SECONDS: number;
}

/**
 * Bounds how long a request may take to arrive (Node's own bounds, 60 s for the head and 300 s for the
 * whole request, would let a few thousand slow clients hold as many sockets for minutes). Past a bound
 * Node raises `ERR_HTTP_REQUEST_TIMEOUT`, answered above as a 408 problem, and the connection closes.
 * Node looks for late requests every `connectionsCheckingInterval` (ExpressAdapterKeepingShapes: every
 * second), so a bound is kept to within a second.
 */
export function boundRequestArrival(server: Server, bounds: ArrivalBounds): void {
  server.headersTimeout = bounds.HTTP_HEADERS_TIMEOUT_SECONDS * 1000;
  server.requestTimeout = bounds.HTTP_REQUEST_TIMEOUT_SECONDS * 1000;
}
