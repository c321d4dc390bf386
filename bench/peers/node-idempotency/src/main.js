'use strict';
/**
 * The B5 peer for `POST /v1/orders`: a minimal NestJS 10 app made idempotent the way
 * @node-idempotency/nestjs documents it (module with the Redis store, `@Idempotent()` on the
 * handler, the `Idempotency-Key` header), doing our business transaction through the bare `pg`
 * driver: the order and its outbox row, one PostgreSQL transaction. Started by
 * bench/peers/node-idempotency.ts, which says what this peer does not guarantee.
 *
 * Plain CommonJS with the decorators applied as calls (what TypeScript emits): it needs no build
 * step and stays out of the repository's typecheck, which must not see this folder's NestJS 10.
 */
require('reflect-metadata');
const { randomUUID } = require('node:crypto');
const {
  BadRequestException,
  Body,
  ConflictException,
  Controller,
  Headers,
  HttpCode,
  Inject,
  Module,
  Post,
  Res,
} = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { Idempotent, NodeIdempotencyModule, StorageAdapterEnum } = require('@node-idempotency/nestjs');
const { Pool } = require('pg');

function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`peer: ${name} is required`);
    process.exit(2);
  }
  return value;
}

const config = {
  port: Number(required('PORT')),
  databaseUrl: required('DATABASE_URL'),
  redisUrl: required('REDIS_URL'),
  poolSize: Number(process.env.DATABASE_POOL_SIZE ?? 10),
  tenantId: process.env.TENANT_ID ?? 'bench-peer', // no authentication here: one fixed tenant
};

const PG_POOL = 'PG_POOL';
const ORDER_EVENTS_TOPIC = 'orders.order-events.v1'; // libs/contracts Topics.orderEvents

/** FNV-1a (32 bit), as libs/outbox/src/key-hash.ts: the relays shard outbox rows by it. */
function keyHash(key) {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(key, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** The checks CreateOrderRequest makes (sku, quantity, optional customerRef), as a 400. */
function orderFields(body) {
  const { sku, quantity, customerRef = null } = body ?? {};
  const problems = [];
  if (typeof sku !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(sku))
    problems.push('sku must be 1-64 characters of A-Z, a-z, 0-9, ".", "_", "-"');
  if (!Number.isInteger(quantity) || quantity < 1 || quantity > 10000) problems.push('quantity must be an integer from 1 to 10000');
  if (customerRef !== null && (typeof customerRef !== 'string' || customerRef.length < 1 || customerRef.length > 64))
    problems.push('customerRef must be 1-64 characters');
  if (problems.length) throw new BadRequestException(problems);
  return { sku, quantity, customerRef };
}

/**
 * The effect: the order and its OrderPlaced outbox row, committed together. The outbox row also
 * carries the Idempotency-Key as a header, so the bench can count orders per key afterwards
 * (the library keeps its keys in Redis, apart from the orders).
 */
async function placeOrder(pool, tenantId, key, fields) {
  const client = await pool.connect();
  let broken;
  try {
    await client.query('BEGIN');
    const { rows } = await client.query({
      name: 'peer-order',
      text: /* sql */ `INSERT INTO orders (id, tenant_id, sku, quantity, customer_ref, status) VALUES ($1, $2, $3, $4, $5, 'placed')
        ON CONFLICT (tenant_id, customer_ref) WHERE customer_ref IS NOT NULL DO NOTHING
        RETURNING id, sku, quantity, customer_ref, status, created_at, cancelled_at, cancel_reason`,
      values: [randomUUID(), tenantId, fields.sku, fields.quantity, fields.customerRef],
    });
    const order = rows[0];
    if (!order) throw new ConflictException(`customerRef ${JSON.stringify(fields.customerRef)} already names an order.`);
    const placed = {
      orderId: order.id,
      tenantId,
      sku: order.sku,
      quantity: order.quantity,
      customerRef: order.customer_ref,
      placedAt: order.created_at.toISOString(),
    };
    await client.query({
      name: 'peer-outbox',
      text: /* sql */ `INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, headers)
        VALUES ($1, $2, $3, $4, 'OrderPlaced', 1, $5, $6, $7)`,
      values: [
        randomUUID(),
        ORDER_EVENTS_TOPIC,
        order.id,
        keyHash(order.id),
        tenantId,
        JSON.stringify(placed),
        JSON.stringify({ 'idempotency-key': key }),
      ],
    });
    await client.query('COMMIT');
    return order;
  } catch (error) {
    await client.query('ROLLBACK').catch((rollbackError) => (broken = rollbackError));
    throw error;
  } finally {
    client.release(broken);
  }
}

/** The order as our API shows it (apps/command-api/src/orders/order.response.ts). */
function toOrderResponse(row) {
  return {
    id: row.id,
    sku: row.sku,
    quantity: row.quantity,
    customerRef: row.customer_ref,
    status: row.status,
    createdAt: row.created_at.toISOString(),
    cancelledAt: row.cancelled_at?.toISOString() ?? null,
    cancelReason: row.cancel_reason,
  };
}

class OrdersController {
  constructor(pool) {
    this.pool = pool;
  }

  async create(body, key, res) {
    const order = await placeOrder(this.pool, config.tenantId, key, orderFields(body));
    res.location(`/v1/orders/${order.id}`);
    return toOrderResponse(order);
  }
}
Reflect.decorate([Controller('v1/orders')], OrdersController);
Inject(PG_POOL)(OrdersController, undefined, 0);
Reflect.decorate(
  [Post(), HttpCode(201), Idempotent()],
  OrdersController.prototype,
  'create',
  Object.getOwnPropertyDescriptor(OrdersController.prototype, 'create'),
);
Body()(OrdersController.prototype, 'create', 0);
Headers('idempotency-key')(OrdersController.prototype, 'create', 1);
Res({ passthrough: true })(OrdersController.prototype, 'create', 2);

async function main() {
  const pool = new Pool({ connectionString: config.databaseUrl, max: config.poolSize, application_name: 'bench-peer-node-idempotency' });
  pool.on('error', () => undefined); // an idle connection the server dropped is replaced on next use
  class AppModule {}
  Reflect.decorate(
    [
      Module({
        imports: [
          NodeIdempotencyModule.forRootAsync({
            storage: { adapter: StorageAdapterEnum.redis, options: { url: config.redisUrl } },
            enforceIdempotency: true, // like ours: no key, no command (400)
            cacheTTLMS: 24 * 60 * 60 * 1000, // the library's default, and our receipts' retention
          }),
        ],
        controllers: [OrdersController],
        providers: [{ provide: PG_POOL, useValue: pool }],
      }),
    ],
    AppModule,
  );
  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
  await app.listen(config.port, '127.0.0.1');
  console.log(`peer: listening on http://127.0.0.1:${config.port}`);
  const stop = async () => {
    await app.close(); // disconnects the library's Redis client
    await pool.end();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((error) => {
  console.error('peer: failed to start', error);
  process.exit(1);
});
