import { Pool } from 'pg';
import { testEnv } from './test-env';
import { eventually } from './eventually';

export interface DeliveryRow {
  message_id: string;
  tenant_id: string;
  order_id: string;
  url: string;
  event_type: string;
  state: 'pending' | 'delivered' | 'dead';
  status_code: number | null;
  attempts: number;
  last_error: string | null;
}

const DELIVERY_COLUMNS = 'message_id, tenant_id, order_id, url, event_type, state, status_code, attempts, last_error';

/** Direct reads of notifier_test, to check what the notifier recorded. */
export class NotifierDb {
  readonly pool = new Pool({ connectionString: testEnv.notifierUrl, max: 2 });

  async deliveries(tenantId: string): Promise<DeliveryRow[]> {
    const { rows } = await this.pool.query(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE tenant_id = $1 ORDER BY sequence`, [
      tenantId,
    ]);
    return rows;
  }

  async delivery(messageId: string): Promise<DeliveryRow[]> {
    const { rows } = await this.pool.query(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE message_id = $1`, [messageId]);
    return rows;
  }

  async inbox(messageId: string): Promise<{ consumer: string; outcome: string }[]> {
    const { rows } = await this.pool.query('SELECT consumer, outcome FROM inbox_messages WHERE message_id = $1', [messageId]);
    return rows;
  }

  async deadLetters(
    messageId: string,
  ): Promise<{ consumer: string; error: string; attempts: number; kafka_partition: number; kafka_offset: string }[]> {
    const { rows } = await this.pool.query(
      'SELECT consumer, error, attempts, kafka_partition, kafka_offset FROM dead_letters WHERE message_id = $1',
      [messageId],
    );
    return rows;
  }

  /** Polls `read` until `done` holds, or fails after `timeoutMs`. */
  until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 30_000): Promise<T> {
    return eventually(read, done, { timeoutMs, intervalMs: 50 });
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
