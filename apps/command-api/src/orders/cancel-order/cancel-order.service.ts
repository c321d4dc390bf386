import { Injectable } from '@nestjs/common';
import { ORDER_EVENT_VERSION, OrderCancelledV1, OrderEventTypes, Operations, Topics } from '@app/contracts';
import { CommandResult, IdempotentResponse } from '@app/idempotency';
import { outboxWrite } from '@app/outbox';
import { Queryable, queryRows } from '@app/platform';
import { problemResponse } from '../../http/problem-catalog';
import { CommandContext } from '../command-context';
import { CommandRunner } from '../command-runner';
import { IdempotencyPolicy } from '../idempotency-policy';
import { ORDER_COLUMNS, OrderRow, toOrderResponse } from '../order.response';

@Injectable()
export class CancelOrderService {
  constructor(
    private readonly commands: CommandRunner,
    private readonly policy: IdempotencyPolicy,
  ) {}

  /**
   * Cancels once per (tenant, orders.cancel, key): the update, its OrderCancelled event and the receipt commit together.
   * `orderId` is canonical (the order-id pipe): the fingerprint is one for every spelling a client used.
   */
  execute(tenantId: string, key: string, orderId: string, reason: string, context: CommandContext): Promise<IdempotentResponse> {
    const idempotent = this.policy.request(tenantId, Operations.cancelOrder, key, { orderId, reason });
    return this.commands.run(idempotent, context, { execute: (db) => this.cancel(db, tenantId, orderId, reason, context) });
  }

  private async cancel(db: Queryable, tenantId: string, orderId: string, reason: string, context: CommandContext): Promise<CommandResult> {
    // Another tenant's order is indistinguishable from a missing one.
    const { rows } = await queryRows<OrderRow>(
      db,
      /* sql */ `SELECT ${ORDER_COLUMNS} FROM orders WHERE id = $1 AND tenant_id = $2 FOR UPDATE`,
      [orderId, tenantId],
    );
    const current = rows[0];
    if (!current)
      return { ...problemResponse('ORDER.NOT_FOUND', `No order ${orderId}.`), retentionSeconds: this.policy.notFoundRetentionSeconds };
    if (current.status === 'cancelled') {
      return problemResponse('ORDER.ALREADY_CANCELLED', `Order ${current.id} was already cancelled.`, {
        order: toOrderResponse(current),
      });
    }

    const updated = await queryRows<OrderRow>(
      db,
      /* sql */ `
      UPDATE orders SET status = 'cancelled', cancel_reason = $3, cancelled_at = now()
      WHERE id = $1 AND tenant_id = $2
      RETURNING ${ORDER_COLUMNS}`,
      [orderId, tenantId, reason],
    );
    // The event, its Kafka key and the receipt's effect name the order as stored, as OrderPlaced did: one key, one partition.
    const order = updated.rows[0];
    const cancelled: OrderCancelledV1 = { orderId: order.id, tenantId, reason, cancelledAt: order.cancelled_at!.toISOString() };
    const { write, messageIds } = outboxWrite([
      {
        topic: Topics.orderEvents,
        key: order.id,
        type: OrderEventTypes.cancelled,
        version: ORDER_EVENT_VERSION,
        tenantId,
        payload: cancelled,
        headers: { traceparent: context.traceparent },
      },
    ]);
    return {
      status: 200,
      headers: {},
      body: toOrderResponse(order),
      effect: { type: 'order', id: order.id },
      withReceipt: [write],
      messageIds,
    };
  }
}
