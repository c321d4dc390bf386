import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { ORDER_EVENT_VERSION, OrderEventTypes, OrderPlacedV1, Operations, Topics } from '@app/contracts';
import { CommandResult, IdempotentResponse } from '@app/idempotency';
import { outboxWrite } from '@app/outbox';
import { CarriedWrite, Queryable, queryRows } from '@app/platform';
import { problemResponse } from '../../http/problem-catalog';
import { CommandContext } from '../command-context';
import { CommandRunner } from '../command-runner';
import { IdempotencyPolicy } from '../idempotency-policy';
import { ORDER_COLUMNS, orderLocation, OrderRow, toOrderResponse } from '../order.response';
import { CreateOrderRequest } from './create-order.request.dto';

@Injectable()
export class CreateOrderService {
  constructor(
    private readonly commands: CommandRunner,
    private readonly policy: IdempotencyPolicy,
  ) {}

  /**
   * Places an order once per (tenant, orders.create, key): the order, its OrderPlaced event and the
   * receipt commit together. The order's id and created_at are decided here (created_at: this
   * process's clock as it places the order, to the millisecond, as the reply and the event show it).
   * Without a customerRef nothing can refuse the order, so its answer is known before it runs: it is
   * a decided command, whose claim, receipt, order and event are one statement (CommandRunner). An
   * order with a customerRef is inserted after the claim: ON CONFLICT DO NOTHING keeps the transaction
   * usable when the customerRef is taken, and that outcome is the answer (stored too).
   */
  execute(tenantId: string, key: string, request: CreateOrderRequest, context: CommandContext): Promise<IdempotentResponse> {
    const fields = { sku: request.sku, quantity: request.quantity, customerRef: request.customerRef ?? null };
    const idempotent = this.policy.request(tenantId, Operations.createOrder, key, fields);
    const order: OrderRow = {
      id: randomUUID(),
      sku: fields.sku,
      quantity: fields.quantity,
      customer_ref: fields.customerRef,
      status: 'placed',
      created_at: new Date(),
      cancelled_at: null,
      cancel_reason: null,
    };
    if (order.customer_ref === null) {
      return this.commands.run(idempotent, context, { decide: () => this.placed(order, tenantId, context, insertPlaced(order, tenantId)) });
    }
    return this.commands.run(idempotent, context, { execute: (db) => this.placeWithCustomerRef(db, order, tenantId, context) });
  }

  private async placeWithCustomerRef(db: Queryable, order: OrderRow, tenantId: string, context: CommandContext): Promise<CommandResult> {
    const { rows } = await queryRows<OrderRow>(
      db,
      /* sql */ `
      INSERT INTO orders (id, tenant_id, sku, quantity, customer_ref, status, created_at)
      VALUES ($1, $2, $3, $4, $5, 'placed', $6)
      ON CONFLICT (tenant_id, customer_ref) WHERE customer_ref IS NOT NULL DO NOTHING
      RETURNING ${ORDER_COLUMNS}`,
      [order.id, tenantId, order.sku, order.quantity, order.customer_ref, order.created_at],
    );
    return rows[0] ? this.placed(rows[0], tenantId, context) : this.customerRefTaken(db, tenantId, order.customer_ref!);
  }

  /** The answer for a placed order, with its OrderPlaced event and, when given, the order's own row for the receipt's statement to carry. */
  private placed(order: OrderRow, tenantId: string, context: CommandContext, insert?: CarriedWrite): CommandResult {
    const placed: OrderPlacedV1 = {
      orderId: order.id,
      tenantId,
      sku: order.sku,
      quantity: order.quantity,
      customerRef: order.customer_ref,
      placedAt: order.created_at.toISOString(),
    };
    const { write, messageIds } = outboxWrite([
      {
        topic: Topics.orderEvents,
        key: order.id,
        type: OrderEventTypes.placed,
        version: ORDER_EVENT_VERSION,
        tenantId,
        payload: placed,
        headers: { traceparent: context.traceparent },
      },
    ]);
    return {
      status: 201,
      headers: { Location: orderLocation(order.id) },
      body: toOrderResponse(order),
      effect: { type: 'order', id: order.id },
      withReceipt: insert ? [write, insert] : [write],
      messageIds,
    };
  }

  private async customerRefTaken(db: Queryable, tenantId: string, customerRef: string): Promise<CommandResult> {
    const { rows } = await queryRows<{ id: string }>(db, /* sql */ `SELECT id FROM orders WHERE tenant_id = $1 AND customer_ref = $2`, [
      tenantId,
      customerRef,
    ]);
    return problemResponse('ORDER.CUSTOMER_REF_USED', `customerRef ${JSON.stringify(customerRef)} already names an order.`, {
      orderId: rows[0]?.id,
    });
  }
}

const ORDER_INSERT_COLUMNS = [
  ['id', 'uuid'],
  ['tenant_id', 'text'],
  ['sku', 'text'],
  ['quantity', 'integer'],
  ['status', 'text'],
  ['created_at', 'timestamptz'],
] as const;

/** `order` (placed, no customerRef) as a write the receipt's statement carries. */
function insertPlaced(order: OrderRow, tenantId: string): CarriedWrite {
  return {
    name: 'placed',
    table: 'orders',
    columns: ORDER_INSERT_COLUMNS,
    rows: [[order.id, tenantId, order.sku, order.quantity, order.status, order.created_at]],
  };
}
