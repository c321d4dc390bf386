import { STATUS_CODES, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { PROBLEM_CONTENT_TYPE } from './problem';
import { httpProblem } from './problem-details.filter';

/** What Node's HTTP parser answers before any app code runs, by its error code (Node's own defaults). */
const STATUS_BY_CODE: Record<string, number> = { HPE_HEADER_OVERFLOW: 431, ERR_HTTP_REQUEST_TIMEOUT: 408 };

/**
 * A request Node's HTTP parser refuses (a control character in a header, an oversized head, a
 * broken request line) never reaches Nest, and Node answers it with a bare `400` and no body.
 * This answers the same status as problem+json, so every error of the service has one shape.
 */
export function answerUnparseableRequestsAsProblems(server: Server): void {
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
}
