import { randomUUID } from 'node:crypto';
import { Pool, PoolConfig } from 'pg';
import { hashApiKey } from '@app/api-clients';
import { Operations, Topics } from '@app/contracts';
import { fingerprint } from '@app/idempotency';
import { keyHash } from '@app/outbox';
import { Reply } from './load';
import { bareTransaction } from './bare-transaction';

/**
 * The ceiling for `POST /v1/orders`: the same work through the bare `pg` driver, no HTTP, no framework.
 * One transaction with the statements the command path runs (claim the receipt, insert the order,
 * insert its outbox row (NOTIFY by trigger), complete the receipt), each answered
 * before the next is sent, on a pool as large as the API's. Prepared statements (named, as the
 * command path's are): the ceiling is the driver at its best, not a handicapped one.
 */
export class BareDriverCreate {
  private readonly pool: Pool;

  constructor(
    url: string,
    poolSize: number,
    private readonly apiKey: string,
  ) {
    this.pool = new Pool({ connectionString: url, max: poolSize, application_name: 'bench-bare-driver' });
  }

  private tenantId?: string;

  /** The API key's tenant, looked up once: the API caches its key lookups too (API_KEY_CACHE_SECONDS). */
  private async tenant(): Promise<string> {
    if (!this.tenantId) {
      const { rows } = await this.pool.query<{ tenant_id: string }>(
        'SELECT tenant_id FROM api_clients WHERE key_sha256 = $1 AND revoked_at IS NULL',
        [hashApiKey(this.apiKey)],
      );
      this.tenantId = rows[0].tenant_id;
    }
    return this.tenantId;
  }

  async create(key: string): Promise<Reply> {
    const started = process.hrtime.bigint();
    const tenantId = await this.tenant();
    const fields = { sku: 'BENCH-1', quantity: 1, customerRef: null };
    const print = fingerprint(fields);
    await bareTransaction(this.pool, async (client) => {
      const claimed = await client.query({
        name: 'bench-claim',
        text: `INSERT INTO idempotency_receipts (tenant_id, operation, idempotency_key, fingerprint, fingerprint_version, region, expires_at)
         VALUES ($1, $2, $3, $4, $5, 'local', now() + make_interval(secs => 86400))
         ON CONFLICT (tenant_id, operation, idempotency_key) DO NOTHING RETURNING expires_at`,
        values: [tenantId, Operations.createOrder, key, print.value, print.version],
      });
      if (claimed.rowCount !== 1) throw new Error(`bare driver: key ${key} was already claimed`);
      const { rows: orders } = await client.query({
        name: 'bench-order',
        text: `INSERT INTO orders (id, tenant_id, sku, quantity, customer_ref, status) VALUES ($1, $2, $3, $4, $5, 'placed')
         ON CONFLICT (tenant_id, customer_ref) WHERE customer_ref IS NOT NULL DO NOTHING
         RETURNING id, sku, quantity, customer_ref, status, created_at, cancelled_at, cancel_reason`,
        values: [randomUUID(), tenantId, fields.sku, fields.quantity, null],
      });
      const order = orders[0];
      const payload = {
        orderId: order.id,
        tenantId,
        sku: order.sku,
        quantity: order.quantity,
        customerRef: null,
        placedAt: order.created_at.toISOString(),
      };
      await client.query({
        name: 'bench-outbox',
        // The table's trigger NOTIFYs the relay (migration 1764720000045), as for the API's rows.
        text: `INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, headers)
           VALUES ($1, $2, $3, $4, 'OrderPlaced', 1, $5, $6, '{}')`,
        values: [randomUUID(), Topics.orderEvents, order.id, keyHash(order.id), tenantId, JSON.stringify(payload)],
      });
      await client.query({
        name: 'bench-complete',
        text: `UPDATE idempotency_receipts SET response_status = 201, response_headers = $4, response_body = $5,
           effect_type = 'order', effect_id = $6, completed_at = now()
         WHERE tenant_id = $1 AND operation = $2 AND idempotency_key = $3`,
        values: [
          tenantId,
          Operations.createOrder,
          key,
          JSON.stringify({ Location: `/v1/orders/${order.id}` }),
          JSON.stringify(order),
          order.id,
        ],
      });
    });
    return { status: 201, headers: {}, body: '', ms: Number(process.hrtime.bigint() - started) / 1e6 };
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}

/**
 * The ceiling for `POST /v1/orders` as the command path now sends it (a decided command): the same
 * statement — the claim inserting the receipt with its answer, the order and its outbox row inserted
 * only if the claim succeeded, the claim or the receipt found returned — sent alone, a transaction of
 * its own as the command path sends it (inOneStatement): one round trip, through the bare `pg` driver
 * (in pg's pipeline mode, as the command-api's pool), no HTTP.
 */
export class BareDriverOneStatement {
  private readonly pool: Pool;

  /** `tenantId`: the tenant the orders are placed for (the bench's API key's). */
  constructor(
    url: string,
    poolSize: number,
    private readonly tenantId: string,
  ) {
    this.pool = new Pool({
      connectionString: url,
      max: poolSize,
      application_name: 'bench-bare-one-statement',
      pipeline: true,
    } as PoolConfig);
  }

  async create(key: string): Promise<Reply> {
    const started = process.hrtime.bigint();
    const tenantId = this.tenantId;
    const fields = { sku: 'BENCH-1', quantity: 1, customerRef: null };
    const print = fingerprint(fields);
    const orderId = randomUUID();
    const createdAt = new Date();
    const order = {
      id: orderId,
      sku: fields.sku,
      quantity: fields.quantity,
      customerRef: null,
      status: 'placed',
      createdAt: createdAt.toISOString(),
    };
    const payload = { orderId, tenantId, sku: fields.sku, quantity: fields.quantity, customerRef: null, placedAt: order.createdAt };
    const client = await this.pool.connect();
    try {
      const claimed = await client.query<{ claimed: boolean }>({
        name: 'bench-one-statement',
        text: `
          WITH claimed AS (
            INSERT INTO idempotency_receipts
              (tenant_id, operation, idempotency_key, fingerprint, fingerprint_version, region, expires_at,
               response_status, response_headers, response_body, effect_type, effect_id, completed_at)
            VALUES ($1, $2, $3, $4, $5, 'local', now() + make_interval(secs => 86400), 201, $6, $7, 'order', $8, now())
            ON CONFLICT (tenant_id, operation, idempotency_key) DO NOTHING
            RETURNING expires_at
          ),
          enqueued AS (
            INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, headers)
            SELECT $9::uuid, $10::text, $8::text, $11::bigint, 'OrderPlaced', 1, $1::text, $12::jsonb, '{}'::jsonb
            WHERE EXISTS (SELECT FROM claimed)
          ),
          placed AS (
            INSERT INTO orders (id, tenant_id, sku, quantity, status, created_at)
            SELECT $8::uuid, $1::text, $13::text, $14::integer, 'placed', $15::timestamptz
            WHERE EXISTS (SELECT FROM claimed)
          )
          SELECT true AS claimed, now(), expires_at FROM claimed
          UNION ALL
          SELECT false, now(), expires_at FROM idempotency_receipts
          WHERE tenant_id = $1 AND operation = $2 AND idempotency_key = $3 AND NOT EXISTS (SELECT FROM claimed)`,
        values: [
          tenantId,
          Operations.createOrder,
          key,
          print.value,
          print.version,
          JSON.stringify({ Location: `/v1/orders/${orderId}` }),
          JSON.stringify(order),
          orderId,
          randomUUID(),
          Topics.orderEvents,
          keyHash(orderId),
          JSON.stringify(payload),
          fields.sku,
          fields.quantity,
          createdAt,
        ],
      });
      if (!claimed.rows[0]?.claimed) throw new Error(`bare driver: key ${key} was already claimed`);
    } finally {
      client.release();
    }
    return { status: 201, headers: {}, body: '', ms: Number(process.hrtime.bigint() - started) / 1e6 };
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
