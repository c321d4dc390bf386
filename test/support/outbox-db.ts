import { randomUUID } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import { Topics } from '@app/contracts';
import { addToOutbox } from '@app/outbox';
import { postgresOptions } from '@app/platform';
import { testEnv } from './test-env';

/** Writes outbox rows through the real writer, in transactions the test controls. */
export class OutboxDb {
  readonly dataSource: DataSource;

  /** `url`: the shared test orders database unless a suite brings its own (support/private-stack.ts). */
  constructor(url = testEnv.ordersUrl) {
    this.dataSource = new DataSource(postgresOptions({ url, applicationName: 'e2e-outbox', poolSize: 4 }));
  }

  async init(): Promise<this> {
    await this.dataSource.initialize();
    return this;
  }

  /** How many of the tenant's rows are not published yet (parked ones included). */
  async unpublished(tenantId: string): Promise<number> {
    const [{ n }] = await this.dataSource.query(
      'SELECT count(*)::int AS n FROM outbox_messages WHERE tenant_id = $1 AND published_at IS NULL',
      [tenantId],
    );
    return n;
  }

  /** Adds one probe event per `[key, n]` in the caller's transaction; returns the message ids. */
  static async add(manager: EntityManager, tenantId: string, events: [key: string, n: number][], payload: object = {}): Promise<string[]> {
    const ids: string[] = [];
    for (const [key, n] of events) {
      ids.push(
        await addToOutbox(manager, {
          topic: Topics.orderEvents,
          key,
          type: 'RelayProbe',
          version: 1,
          tenantId,
          payload: { key, n, ...payload },
          headers: { traceparent: `00-${randomUUID().replace(/-/g, '')}-${'1'.repeat(16)}-01` },
        }),
      );
    }
    return ids;
  }

  async commit(tenantId: string, events: [key: string, n: number][], payload: object = {}): Promise<string[]> {
    return this.dataSource.transaction((manager) => OutboxDb.add(manager, tenantId, events, payload));
  }

  /**
   * Rows on `topic` as if the relay had published them `publishedSecondsAgo` ago (for replays), committed
   * already published so no relay ever claims them. Returns the message ids in sequence order.
   */
  async commitPublished(topic: string, tenantId: string, events: [key: string, n: number][], publishedSecondsAgo = 0): Promise<string[]> {
    return this.dataSource.transaction(async (manager) => {
      const ids: string[] = [];
      for (const [key, n] of events) {
        ids.push(await addToOutbox(manager, { topic, key, type: 'RelayProbe', version: 1, tenantId, payload: { key, n } }));
      }
      await manager.query(
        // Committed and published that long ago (a row is never published before it exists).
        `UPDATE outbox_messages SET created_at = now() - make_interval(secs => $2), published_at = now() - make_interval(secs => $2),
                attempts = 1
         WHERE id = ANY($1::uuid[])`,
        [ids, publishedSecondsAgo],
      );
      return ids;
    });
  }

  async close(): Promise<void> {
    await this.dataSource.destroy();
  }
}
