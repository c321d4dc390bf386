import { ApiProperty } from '@nestjs/swagger';
import type { OrderStatus } from './order.entity';

/** The order as every endpoint shows it. */
export class OrderResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({ example: 'SKU-1' }) sku: string;
  @ApiProperty({ type: 'integer', minimum: 1, maximum: 10000 }) quantity: number;
  @ApiProperty({ type: String, nullable: true }) customerRef: string | null;
  @ApiProperty({ enum: ['placed', 'cancelled'] }) status: OrderStatus;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ type: String, format: 'date-time', nullable: true }) cancelledAt: string | null;
  @ApiProperty({ type: String, nullable: true }) cancelReason: string | null;
}

export interface OrderRow {
  id: string;
  sku: string;
  quantity: number;
  customer_ref: string | null;
  status: OrderStatus;
  created_at: Date;
  cancelled_at: Date | null;
  cancel_reason: string | null;
}

export const ORDER_COLUMNS = 'id, sku, quantity, customer_ref, status, created_at, cancelled_at, cancel_reason';

export function toOrderResponse(row: OrderRow): OrderResponse {
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

export function orderLocation(id: string): string {
  return `/v1/orders/${id}`;
}
