import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  idempotencyKey: string | undefined;
  /** The body as sent (what the signature covers), and parsed when it is JSON. */
  raw: string;
  body: any;
  /** When it arrived (ms since the epoch). */
  at: number;
  /** What this request was answered with (or would have been: the caller may have given up waiting). */
  status: number;
}

/** How to answer one request: a status, optionally after a delay (to outlast the caller's timeout). */
export type Reply = number | { status: number; delayMs: number };

/**
 * A real HTTP server playing the webhook receiver: it records every request and answers each
 * `Idempotency-Key` with the replies scripted for it, in order, then 200.
 */
export class WebhookReceiver {
  readonly requests: ReceivedWebhook[] = [];
  private readonly scripts = new Map<string, Reply[]>();
  private readonly seen = new Set<string>();
  private firstReplies: Reply[] = [];
  private down?: { until: number; status: number };
  private server?: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // kept as text
        }
        const key = req.headers['idempotency-key'] as string | undefined;
        if (key && !this.seen.has(key)) {
          this.seen.add(key);
          if (!this.scripts.has(key) && this.firstReplies.length) this.scripts.set(key, [...this.firstReplies]);
        }
        const outage = this.down && Date.now() < this.down.until ? this.down.status : undefined;
        const reply: Reply = outage ?? (key ? this.scripts.get(key)?.shift() : undefined) ?? 200;
        const { status, delayMs } = typeof reply === 'number' ? { status: reply, delayMs: 0 } : reply;
        this.requests.push({
          method: req.method!,
          path: req.url!,
          headers: req.headers,
          idempotencyKey: key,
          raw: text,
          body,
          status,
          at: Date.now(),
        });
        setTimeout(() => {
          if (res.destroyed) return;
          res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify({ status }));
        }, delayMs);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/webhooks/orders`;
  }

  /** The next requests carrying `idempotencyKey` get these replies, in order; later ones get 200. */
  script(idempotencyKey: string, replies: Reply[]): void {
    this.scripts.set(idempotencyKey, [...replies]);
  }

  /** Every key not scripted otherwise gets these replies first (for keys the test cannot know ahead). */
  scriptEveryNewKey(replies: Reply[]): void {
    this.firstReplies = [...replies];
  }

  /** Every request answers `status` for the next `ms` (a receiver that is down), scripts notwithstanding. */
  failFor(ms: number, status = 503): void {
    this.down = { until: Date.now() + ms, status };
  }

  /** The requests whose webhook payload (`{type, timestamp, data}`) belongs to `tenantId`. */
  forTenant(tenantId: string): ReceivedWebhook[] {
    return this.requests.filter((r) => r.body?.data?.tenantId === tenantId);
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}
