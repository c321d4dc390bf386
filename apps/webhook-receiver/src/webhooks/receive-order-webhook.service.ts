import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { OrderWebhook } from '@app/contracts';
import { queryRows } from '@app/platform';
import { VerifiedDelivery } from './webhook-verifier';

export type ReceiveOutcome = 'stored' | 'duplicate';

/** Records each verified delivery once per webhook-id. */
@Injectable()
export class ReceiveOrderWebhookService {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * One transaction: the dedupe row, and your effect only when the row is new. They commit together
   * or not at all, so a retried delivery (same webhook-id) changes nothing and is just acknowledged.
   */
  async receive(delivery: VerifiedDelivery, webhook: OrderWebhook): Promise<ReceiveOutcome> {
    return this.dataSource.transaction(async (manager) => {
      // A concurrent duplicate waits here on the primary key until the first commits, then inserts nothing.
      const { rows } = await queryRows(
        manager,
        /* sql */ `
        INSERT INTO received_webhooks (webhook_id, event_type, tenant_id, order_id, payload, signed_at)
        VALUES ($1, $2, $3, $4, $5, $6)
        ON CONFLICT (webhook_id) DO NOTHING
        RETURNING webhook_id`,
        [delivery.webhookId, webhook.type, webhook.data.tenantId, webhook.data.orderId, webhook, delivery.signedAt],
      );
      if (rows.length === 0) return 'duplicate';
      // Your own effect goes here, through `manager`. Keep it quick: the sender waits for the answer
      // (and retries after its timeout); slow work belongs in a job this transaction records.
      return 'stored';
    });
  }
}
