import { createServer, IncomingMessage, request as httpRequest, Server, ServerResponse } from 'node:http';
import { freePort } from './free-port';

/**
 * What the proxy does to one request between a client and the real command API:
 * - `pass`: forwards it and relays the answer;
 * - `reset`: resets the connection as soon as the request arrived; the service never sees it;
 * - `drop-reply`: forwards it, waits for the service's whole answer, then resets the connection instead of relaying it;
 * - `delay-reply`: forwards it and holds the answer `delayMs` before relaying it (past the client's attempt timeout);
 * - `gateway-timeout`: forwards it, waits for the answer, and answers 504 as a gateway that lost it would;
 * - `unavailable`: answers 503 problem+json with Retry-After itself (the service never sees it), as a
 *   service shedding load does; `retryAfterSeconds` sets the header.
 * - `gateway-answer`: answers `status` in text/plain, no problem document, as a gateway or load balancer
 *   does; `forwarded` first passes the request on and discards the service's answer (an upstream reset
 *   after the request was sent), otherwise the service never sees it (a deploy draining, a proxy's own limit).
 */
export type Fault =
  | { kind: 'pass' | 'reset' | 'drop-reply' | 'gateway-timeout' }
  | { kind: 'delay-reply'; delayMs: number }
  | { kind: 'unavailable'; retryAfterSeconds: number }
  | { kind: 'gateway-answer'; status: number; forwarded: boolean; retryAfterSeconds?: number }
  | { kind: 'hold-request'; delayMs: number; before?: () => Promise<void> };

/** Everything the proxy saw, in order: for assertions about attempts and waits. */
export interface Seen {
  method: string;
  path: string;
  key: string | undefined;
  fault: Fault['kind'];
  at: number;
  /** The status the service answered (undefined when it never saw the request). */
  served?: number;
}

/**
 * An HTTP proxy in front of the real command API that injects one fault per request, chosen by
 * `choose` (by the request's Idempotency-Key, or the key of a receipt lookup). Nothing is faked on the
 * service's side: every forwarded request is handled by the running app and its database.
 */
export class FaultProxy {
  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly seen: Seen[],
  ) {}

  static async start(upstream: string, choose: (request: { method: string; path: string; key: string | undefined }) => Fault) {
    const target = new URL(upstream);
    const seen: Seen[] = [];
    const server = createServer((req, res) => void handle(req, res));
    async function handle(req: IncomingMessage, res: ServerResponse) {
      const body = await readAll(req);
      const path = req.url ?? '/';
      const key = (req.headers['idempotency-key'] as string | undefined) ?? receiptKey(path);
      const fault = choose({ method: req.method ?? 'GET', path, key });
      const entry: Seen = { method: req.method ?? 'GET', path, key, fault: fault.kind, at: Date.now() };
      seen.push(entry);
      if (fault.kind === 'reset') return req.socket.resetAndDestroy();
      if (fault.kind === 'unavailable') {
        res.writeHead(503, { 'Content-Type': 'application/problem+json', 'Retry-After': String(fault.retryAfterSeconds) });
        return res.end(JSON.stringify({ type: '/problems/service-unavailable', title: 'Service unavailable', status: 503 }));
      }
      if (fault.kind === 'gateway-answer' && !fault.forwarded) return gatewayAnswer(res, fault);
      if (fault.kind === 'hold-request') {
        await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
        await fault.before?.();
      }
      let answer: { status: number; headers: IncomingMessage['headers']; body: Buffer };
      try {
        answer = await forward(target, req, body);
      } catch {
        return req.socket.resetAndDestroy();
      }
      entry.served = answer.status;
      if (fault.kind === 'drop-reply') return req.socket.resetAndDestroy();
      if (fault.kind === 'gateway-timeout') {
        res.writeHead(504, { 'Content-Type': 'text/plain' });
        return res.end('gateway timeout');
      }
      if (fault.kind === 'gateway-answer') return gatewayAnswer(res, fault);
      if (fault.kind === 'delay-reply') await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
      if (res.destroyed) return;
      res.writeHead(answer.status, answer.headers);
      res.end(answer.body);
    }
    const port = await freePort();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    return new FaultProxy(server, `http://127.0.0.1:${port}`, seen);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

function gatewayAnswer(res: ServerResponse, fault: Extract<Fault, { kind: 'gateway-answer' }>): void {
  const retryAfter = fault.retryAfterSeconds === undefined ? {} : { 'Retry-After': String(fault.retryAfterSeconds) };
  res.writeHead(fault.status, { 'Content-Type': 'text/plain', ...retryAfter }).end(`gateway answered ${fault.status}`);
}

function receiptKey(path: string): string | undefined {
  const match = /^\/v1\/idempotency-receipts\/[^/]+\/([^/?]+)/.exec(path);
  return match ? decodeURIComponent(match[1]) : undefined;
}

function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

function forward(
  target: URL,
  req: IncomingMessage,
  body: Buffer,
): Promise<{ status: number; headers: IncomingMessage['headers']; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const headers = { ...req.headers, host: target.host };
    delete headers.connection;
    const upstream = httpRequest(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers, agent: false },
      (res) =>
        readAll(res).then((answer) => {
          const replyHeaders = { ...res.headers };
          delete replyHeaders.connection;
          delete replyHeaders['keep-alive'];
          delete replyHeaders['transfer-encoding'];
          replyHeaders['content-length'] = String(answer.length);
          resolve({ status: res.statusCode!, headers: replyHeaders, body: answer });
        }, reject),
    );
    upstream.on('error', reject);
    upstream.end(body);
  });
}
