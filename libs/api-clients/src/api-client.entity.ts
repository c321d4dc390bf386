import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';
import type { Operation } from '@app/contracts';

@Entity('api_clients')
export class ApiClient {
  @PrimaryColumn('uuid')
  id: string;

  @Column({ name: 'tenant_id' })
  tenantId: string;

  @Column()
  name: string;

  @Column({ name: 'allowed_operations', type: 'text', array: true })
  allowedOperations: Operation[];

  @Column({ name: 'key_sha256', type: 'bytea', select: false })
  keySha256: Buffer;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt: Date | null;
}
