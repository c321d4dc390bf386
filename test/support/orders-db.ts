import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { ApiClient, createApiClient } from '@app/api-clients';
import { Operation } from '@app/contracts';
import { postgresOptions } from '@app/platform';
import { testEnv } from './test-env';

/** Direct access to orders_test, to check what a request left behind (not to fake anything). */
export class OrdersDb {
  readonly pool: Pool;
  private readonly dataSource: DataSource;

  /** `url`: another orders database than orders_test, e.g. a suite's private one (test/support/private-stack.ts). */
  constructor(url = testEnv.ordersUrl) {
    this.pool = new Pool({ connectionString: url, max: 4 });
    this.pool.on('error', () => undefined); // an idle connection the server dropped (a restart) is replaced on next use
    this.dataSource = new DataSource(postgresOptions({ url, applicationName: 'e2e', entities: [ApiClient], poolSize: 2 }));
  }

  /** A tenant of its own, so suites never see each other's rows, with a client allowed `operations`. */
  async tenant(operations?: Operation[]): Promise<{ tenantId: string; apiKey: string; clientId: string }> {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    return { tenantId, ...(await this.client(tenantId, operations)) };
  }

  async client(tenantId: string, operations?: Operation[]): Promise<{ apiKey: string; clientId: string }> {
    if (!this.dataSource.isInitialized) await this.dataSource.initialize();
    const { client, apiKey } = await createApiClient(this.dataSource.manager, { tenantId, operations });
    return { apiKey, clientId: client.id };
  }

  /** Orders, receipts and outbox rows of one tenant. */
  async counts(tenantId: string): Promise<{ orders: number; receipts: number; outbox: number }> {
    const { rows } = await this.pool.query(
      /* sql */ `
      SELECT (SELECT count(*) FROM orders WHERE tenant_id = $1)::int AS orders,
             (SELECT count(*) FROM idempotency_receipts WHERE tenant_id = $1)::int AS receipts,
             (SELECT count(*) FROM outbox_messages WHERE tenant_id = $1)::int AS outbox`,
      [tenantId],
    );
    return rows[0];
  }

  async close(): Promise<void> {
    await this.pool.end();
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}
