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

  /** Places an order once per (tenant, orders.create, key): the order, its OrderPlaced event and the receipt commit together. */
  execute(tenantId: string, key: string, request: CreateOrderRequest, context: CommandContext): Promise<IdempotentResponse> {
    const fields = { sku: request.sku, quantity: request.quantity, customerRef: request.customerRef ?? null };
    const idempotent = this.policy.request(tenantId, Operations.createOrder, key, fields);
    return this.commands.run(idempotent, context, (db, { now }) => this.placeOrder(db, tenantId, fields, context, now));
  }

  /**
   * An order with a customerRef is inserted first: ON CONFLICT DO NOTHING keeps the transaction usable
   * when the customerRef is taken, and that outcome is the answer (stored too). Nothing can refuse an
   * order without one, so it rides with the receipt and its event in the transaction's last statement,
   * one round trip fewer: its row is known before it is written, created_at being the transaction's now().
   */
  private async placeOrder(
    db: Queryable,
    tenantId: string,
    fields: OrderFields,
    context: CommandContext,
    now: Date,
  ): Promise<CommandResult> {
    const id = randomUUID();
    if (fields.customerRef === null) {
      const order: OrderRow = {
        id,
        sku: fields.sku,
        quantity: fields.quantity,
        customer_ref: null,
        status: 'placed',
        created_at: now,
        cancelled_at: null,
        cancel_reason: null,
      };
      return this.placed(order, tenantId, context, insertPlaced(order, tenantId));
    }
    const { rows } = await queryRows<OrderRow>(
      db,
      /* sql */ `
      INSERT INTO orders (id, tenant_id, sku, quantity, customer_ref, status)
      VALUES ($1, $2, $3, $4, $5, 'placed')
      ON CONFLICT (tenant_id, customer_ref) WHERE customer_ref IS NOT NULL DO NOTHING
      RETURNING ${ORDER_COLUMNS}`,
      [id, tenantId, fields.sku, fields.quantity, fields.customerRef],
    );
    return rows[0] ? this.placed(rows[0], tenantId, context) : this.customerRefTaken(db, tenantId, fields.customerRef);
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

type OrderFields = { sku: string; quantity: number; customerRef: string | null };

/** `order` (placed, no customerRef) as a write the receipt's statement carries; created_at is the transaction's now(). */
function insertPlaced(order: OrderRow, tenantId: string): CarriedWrite {
  return {
    name: 'placed',
    sql: (n) => /* sql */ `
      INSERT INTO orders (id, tenant_id, sku, quantity, customer_ref, status, created_at)
      VALUES ($${n}, $${n + 1}, $${n + 2}, $${n + 3}, NULL, 'placed', now())`,
    parameters: [order.id, tenantId, order.sku, order.quantity],
  };
}
