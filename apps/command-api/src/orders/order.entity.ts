import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

export type OrderStatus = 'placed' | 'cancelled';

@Entity('orders')
export class Order {
  @PrimaryColumn('uuid')
  id: string;

  @Column({ name: 'tenant_id' })
  tenantId: string;

  @Column()
  sku: string;

  @Column('integer')
  quantity: number;

  @Column({ name: 'customer_ref', type: 'text', nullable: true })
  customerRef: string | null;

  @Column('text')
  status: OrderStatus;

  @Column({ name: 'cancel_reason', type: 'text', nullable: true })
  cancelReason: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'cancelled_at', type: 'timestamptz', nullable: true })
  cancelledAt: Date | null;
}
