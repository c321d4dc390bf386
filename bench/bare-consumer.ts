import { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { Pool } from 'pg';
import { Headers, OrderPlacedV1, Topics } from '@app/contracts';
import { bareTransaction } from './bare-transaction';

export const BARE_GROUP = 'bench-bare-consumer';
/** As libs/inbox's InboxConsumer by default (KAFKA_PARTITIONS_CONCURRENTLY): four partitions' batches at a time. */
export const PARTITIONS_IN_PARALLEL = 4;

/** The baseline's tables, beside fulfillment's in its database and shaped like them (same keys and indexes). */
export async function createBareTables(pool: Pool): Promise<void> {
  await pool.query(/* sql */ `
    CREATE TABLE bare_inbox (LIKE inbox_messages INCLUDING ALL);
    CREATE TABLE bare_shipments (LIKE shipments INCLUDING ALL)`);
}

/**
 * The baseline: what kafkajs and PostgreSQL do with no framework. One transaction per fetched batch
 * (the inbox rows ON CONFLICT DO NOTHING, then a shipment for each new one), offsets committed after
 * the database commit.
 */
export class BareConsumer {
  private consumer?: Consumer;

  constructor(
    private readonly kafka: Kafka,
    private readonly pool: Pool,
  ) {}

  /** Fetch settings as libs/inbox's InboxConsumer has them, so the comparison is of the work, not of the fetching. */
  async start(): Promise<void> {
    this.consumer = this.kafka.consumer({ groupId: BARE_GROUP, allowAutoTopicCreation: false, maxWaitTimeInMs: 1_000 });
    await this.consumer.connect();
    await this.consumer.subscribe({ topic: Topics.orderEvents, fromBeginning: true });
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: PARTITIONS_IN_PARALLEL,
      eachBatch: (payload) => this.onBatch(payload),
    });
  }

  async stop(): Promise<void> {
    await this.consumer?.disconnect();
  }

  private async onBatch({ batch, resolveOffset, heartbeat }: EachBatchPayload): Promise<void> {
    if (batch.messages.length === 0) return;
    const ids: string[] = [];
    const offsets: string[] = [];
    const types: string[] = [];
    const tenants: string[] = [];
    const orders: string[] = [];
    const skus: string[] = [];
    const quantities: number[] = [];
    for (const message of batch.messages) {
      const payload = JSON.parse(message.value!.toString()) as OrderPlacedV1;
      ids.push(message.headers![Headers.messageId]!.toString());
      types.push(message.headers![Headers.eventType]!.toString());
      offsets.push(message.offset);
      tenants.push(payload.tenantId);
      orders.push(payload.orderId);
      skus.push(payload.sku);
      quantities.push(payload.quantity);
    }
    await bareTransaction(this.pool, async (client) => {
      // Prepared, as every statement of the service is: the baseline is the best the bare driver does.
      const { rows } = await client.query<{ message_id: string }>({
        name: 'bare-inbox',
        text: /* sql */ `
        INSERT INTO bare_inbox (consumer, message_id, topic, kafka_partition, kafka_offset, event_type, outcome)
        SELECT 'bare', id, $2, $3, o, t, 'applied' FROM unnest($1::uuid[], $4::bigint[], $5::text[]) AS m(id, o, t)
        ON CONFLICT (consumer, message_id) DO NOTHING
        RETURNING message_id`,
        values: [ids, batch.topic, batch.partition, offsets, types],
      });
      await client.query({
        name: 'bare-shipments',
        text: /* sql */ `
        INSERT INTO bare_shipments (id, tenant_id, order_id, sku, quantity, status, message_id)
        SELECT gen_random_uuid(), tenant, order_id, sku, quantity, 'pending', id
        FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::int[]) AS m(id, tenant, order_id, sku, quantity)
        WHERE id = ANY($6::uuid[])
        ON CONFLICT (tenant_id, order_id) DO NOTHING`,
        values: [ids, tenants, orders, skus, quantities, rows.map((row) => row.message_id)],
      });
    });
    const last = batch.messages[batch.messages.length - 1].offset;
    await this.consumer!.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() }]);
    resolveOffset(last);
    await heartbeat();
  }
}
