import { request as httpRequest } from 'node:http';

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The parsed JSON body, or undefined when the body is not JSON. */
  body: any;
}

export interface HttpCall {
  method?: string;
  /** A list is sent as that many field lines of the one name. */
  headers?: Record<string, string | string[]>;
  /** An object is sent as JSON; a string or Buffer is sent as it is. */
  body?: unknown;
}

/** One HTTP request on its own TCP connection (no keep-alive pool), as separate clients would send it. */
export function http(url: string, { method = 'GET', headers = {}, body }: HttpCall = {}): Promise<HttpResult> {
  const payload = body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  const contentType = typeof body === 'object' && !Buffer.isBuffer(body) ? { 'Content-Type': 'application/json' } : {};
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, agent: false, headers: { ...contentType, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode!, headers: res.headers, text, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}
