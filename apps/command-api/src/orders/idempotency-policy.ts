import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { IdempotentRequest, SemanticFields } from '@app/idempotency';
import { Operation, Operations } from '@app/contracts';
import { CommandApiConfig } from '../config';

/** The deployment's idempotency contract: retention and tombstone per operation, and the region recorded on receipts. */
@Injectable()
export class IdempotencyPolicy {
  private readonly retention: Record<string, number>;
  private readonly tombstone: Record<string, number>;
  private readonly region: string;
  /**
   * How long the answer that an order does not exist is remembered: computed again it is the same
   * answer (order ids come from the server), so a flood of cancels of made-up ids stores no day-long
   * receipts. IDEMPOTENCY_RETENTION_SECONDS_NOT_FOUND, at most the operation's retention.
   */
  readonly notFoundRetentionSeconds: number;

  constructor(config: ConfigService<CommandApiConfig, true>) {
    const fallback = config.get('IDEMPOTENCY_RETENTION_SECONDS', { infer: true });
    this.retention = {
      [Operations.createOrder]: config.get('IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CREATE', { infer: true }) ?? fallback,
      [Operations.cancelOrder]: config.get('IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CANCEL', { infer: true }) ?? fallback,
    };
    this.tombstone = {
      [Operations.createOrder]: config.get('IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CREATE', { infer: true }),
      [Operations.cancelOrder]: config.get('IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CANCEL', { infer: true }),
    };
    this.region = config.get('SERVICE_REGION', { infer: true });
    this.notFoundRetentionSeconds = config.get('IDEMPOTENCY_RETENTION_SECONDS_NOT_FOUND', { infer: true });
  }

  request(tenantId: string, operation: Operation, key: string, fields: SemanticFields): IdempotentRequest {
    return {
      scope: { tenantId, operation, key },
      fields,
      retentionSeconds: this.retention[operation],
      tombstoneSeconds: this.tombstone[operation],
      region: this.region,
    };
  }

  retentionSeconds(operation: Operation): number {
    return this.retention[operation];
  }
}
