import { Pool } from 'pg';
import { testEnv } from './test-env';
import { eventually } from './eventually';

/** Direct reads of fulfillment_test, to check what the consumer left behind. */
export class FulfillmentDb {
  readonly pool = new Pool({ connectionString: testEnv.fulfillmentUrl, max: 2 });

  async shipments(tenantId: string): Promise<{ order_id: string; status: string; message_id: string; quantity: number }[]> {
    const { rows } = await this.pool.query(
      'SELECT order_id, status, message_id, quantity FROM shipments WHERE tenant_id = $1 ORDER BY created_at',
      [tenantId],
    );
    return rows;
  }

  async inbox(messageId: string): Promise<{ consumer: string; outcome: string }[]> {
    const { rows } = await this.pool.query('SELECT consumer, outcome FROM inbox_messages WHERE message_id = $1', [messageId]);
    return rows;
  }

  async deadLetters(messageId: string): Promise<{ consumer: string; error: string; attempts: number }[]> {
    const { rows } = await this.pool.query('SELECT consumer, error, attempts FROM dead_letters WHERE message_id = $1', [messageId]);
    return rows;
  }

  /** Polls `read` until `done` holds, or fails after `timeoutMs`. */
  until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 60_000): Promise<T> {
    return eventually(read, done, { timeoutMs });
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
