import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { IdempotentRequest, SemanticFields } from '@app/idempotency';
import { Operation, Operations } from '@app/contracts';
import { CommandApiConfig } from '../config';

/** The deployment's idempotency contract: retention per operation and the region recorded on receipts. */
@Injectable()
export class IdempotencyPolicy {
  private readonly retention: Record<string, number>;
  private readonly region: string;

  constructor(config: ConfigService<CommandApiConfig, true>) {
    const fallback = config.get('IDEMPOTENCY_RETENTION_SECONDS', { infer: true });
    this.retention = {
      [Operations.createOrder]: config.get('IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CREATE', { infer: true }) ?? fallback,
      [Operations.cancelOrder]: config.get('IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CANCEL', { infer: true }) ?? fallback,
    };
    this.region = config.get('SERVICE_REGION', { infer: true });
  }

  request(tenantId: string, operation: Operation, key: string, fields: SemanticFields): IdempotentRequest {
    return {
      scope: { tenantId, operation, key },
      fields,
      retentionSeconds: this.retention[operation],
      region: this.region,
    };
  }

  retentionSeconds(operation: Operation): number {
    return this.retention[operation];
  }
}
