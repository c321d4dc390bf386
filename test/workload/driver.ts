import { Agent, request } from 'node:http';
import { Attempt, History, Intent, Operation, Resolution } from './history';

export interface WorkloadOptions {
  /** The command API's base URL (a function: the harness may point it elsewhere between requests). */
  apiUrl: () => string;
  apiKey: string;
  tenantId: string;
  /** Commands to send, retries included; the resends that resolve unknown outcomes come on top. */
  commands: number;
  concurrency?: number;
  /** Share of commands that reuse an earlier key; of those, `changedShare` change a declared field. */
  retryShare?: number;
  changedShare?: number;
  /** Share of fresh commands that cancel an order placed earlier in the run. */
  cancelShare?: number;
  /** No reply within this is an unknown outcome (the request may still commit). */
  timeoutMs?: number;
  seed?: number;
  /** Key prefix, so two runs against one tenant never share a key. */
  prefix?: string;
  /** Commands start at most this often (none: as fast as `concurrency` allows). */
  ratePerSecond?: number;
  /** Past `commands`, keeps sending while this says so (faults still being injected). */
  keepGoing?: () => boolean;
  /**
   * Told as each request to `apiUrl()` starts (+1) and ends (-1, `cutOff` when it got no answer at all):
   * the harness aims its faults with it.
   */
  inFlight?: (apiUrl: string, change: 1 | -1, cutOff?: boolean) => void;
}

interface Action {
  operation: Operation;
  key: string;
  fields: Record<string, string | number>;
  /** The status a reply or the receipt settled on; undefined while unknown. */
  settled?: number;
}

/** Statuses that mean "not done, try again later": the outcome is unknown until a receipt or a replay says. */
const TRY_AGAIN = new Set([409, 503]);

/**
 * Sends `commands` commands to the real command API with `concurrency` in flight, and records every
 * request and answer. Fresh keys create orders or cancel ones placed earlier; ~`retryShare` resend an
 * earlier key (racing the original when it is still in flight), a few of them with a changed field.
 * A request without a definite answer (no reply, a reset connection, 503, 409 in progress) is resolved
 * as a client would: the receipt endpoint, then a resend with the same key and fields until one answers.
 */
export async function runWorkload(options: WorkloadOptions): Promise<History> {
  const { commands, concurrency = 32, retryShare = 0.3, changedShare = 0.1, cancelShare = 0.25, timeoutMs = 15_000 } = options;
  const random = mulberry32(options.seed ?? Date.now());
  const prefix = options.prefix ?? `w${Date.now().toString(36)}`;
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency * 2 });
  const history: History = { tenantId: options.tenantId, attempts: [], resolutions: [] };
  const actions: Action[] = [];
  const placedOrders: string[] = [];
  let next = 0;

  const send = async (action: Action, intent: Intent, fields = action.fields): Promise<Attempt> => {
    const path = action.operation === 'orders.create' ? '/v1/orders' : `/v1/orders/${fields.orderId}/cancel`;
    const body = action.operation === 'orders.create' ? { sku: fields.sku, quantity: fields.quantity } : { reason: fields.reason };
    const attempt: Attempt = {
      operation: action.operation,
      key: action.key,
      intent,
      fields,
      startedAt: Date.now(),
      endedAt: 0,
      replayed: false,
    };
    const apiUrl = options.apiUrl();
    options.inFlight?.(apiUrl, 1);
    try {
      const reply = await call(agent, `${apiUrl}${path}`, 'POST', timeoutMs, options.apiKey, action.key, body);
      attempt.status = reply.status;
      attempt.replayed = reply.headers['idempotent-replayed'] === 'true';
      attempt.retryAfter = reply.headers['retry-after'] as string | undefined;
      attempt.orderId = reply.body?.id ?? reply.body?.order?.id;
    } catch (error) {
      attempt.error = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    } finally {
      options.inFlight?.(apiUrl, -1, attempt.error !== undefined);
    }
    attempt.endedAt = Date.now();
    history.attempts.push(attempt);
    return attempt;
  };

  /** Until the key's outcome is known: ask the receipt endpoint, resend when nothing is remembered. */
  const resolve = async (action: Action, last: Attempt): Promise<void> => {
    for (let round = 0; round < 20 && (last.status === undefined || TRY_AGAIN.has(last.status)); round++) {
      if (last.status === 409 && !last.retryAfter) break; // 409 already cancelled: a stored answer
      await sleep(Math.min(2_000, 200 * 2 ** Math.min(round, 4)));
      const lookup = await lookupReceipt(action).catch(() => undefined);
      if (lookup?.lookupStatus === 200) {
        history.resolutions.push(lookup);
        action.settled = lookup.responseStatus;
        return;
      }
      last = await send(action, 'resolve');
    }
    if (last.status !== undefined && !(TRY_AGAIN.has(last.status) && last.retryAfter)) action.settled = last.status;
  };

  const lookupReceipt = async (action: Action): Promise<Resolution> => {
    const reply = await call(
      agent,
      `${options.apiUrl()}/v1/idempotency-receipts/${action.operation}/${encodeURIComponent(action.key)}`,
      'GET',
      timeoutMs,
      options.apiKey,
    );
    return {
      operation: action.operation,
      key: action.key,
      lookupStatus: reply.status,
      responseStatus: reply.body?.responseStatus,
      effectId: reply.body?.effect?.id,
    };
  };

  const one = async (n: number): Promise<void> => {
    const settled = actions.filter((a) => a.settled !== undefined && a.settled < 500);
    if (actions.length > 0 && random() < retryShare) {
      if (settled.length > 0 && random() < changedShare) {
        const action = settled[Math.floor(random() * settled.length)];
        const fields =
          action.operation === 'orders.create'
            ? { ...action.fields, quantity: Number(action.fields.quantity) + 1 }
            : { ...action.fields, reason: `${action.fields.reason} (changed)` };
        await send(action, 'changed', fields);
        return;
      }
      const action = actions[Math.floor(random() * actions.length)];
      const attempt = await send(action, 'retry');
      if (action.settled === undefined) await resolve(action, attempt);
      return;
    }
    const cancel = placedOrders.length > 0 && random() < cancelShare;
    const action: Action = cancel
      ? {
          operation: 'orders.cancel',
          key: `${prefix}-c${n}`,
          fields: { orderId: placedOrders[Math.floor(random() * placedOrders.length)], reason: `reason ${n}` },
        }
      : { operation: 'orders.create', key: `${prefix}-o${n}`, fields: { sku: `SKU-${n % 50}`, quantity: 1 + (n % 9) } };
    actions.push(action);
    const attempt = await send(action, 'first');
    if (attempt.status === undefined || TRY_AGAIN.has(attempt.status)) await resolve(action, attempt);
    else action.settled = attempt.status;
    const orderId = history.attempts.filter((a) => a.key === action.key && a.status === 201).pop()?.orderId;
    if (action.operation === 'orders.create' && orderId) placedOrders.push(orderId);
  };

  const started = Date.now();
  const keepGoing = options.keepGoing ?? (() => false);
  const worker = async (): Promise<void> => {
    for (let n = next++; n < commands || keepGoing(); n = next++) {
      if (options.ratePerSecond) await sleep(started + (n * 1000) / options.ratePerSecond - Date.now());
      await one(n);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  return history;
}

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

function call(agent: Agent, url: string, method: string, timeoutMs: number, apiKey: string, key?: string, body?: unknown): Promise<Reply> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers: Record<string, string> = { Authorization: `Bearer ${apiKey}` };
  if (key !== undefined) headers['Idempotency-Key'] = key;
  if (payload !== undefined) headers['Content-Type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode!, headers: res.headers, body: parsed });
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', reject);
    req.end(payload);
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

/** A small seeded PRNG, so a run's choices can be repeated with its printed seed. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
