import { Kafka } from 'kafkajs';
import { Pool } from 'pg';
import { Headers, Topics } from '@app/contracts';
import { createKafka } from '@app/platform';
import { AppName, RunningApp, startApp } from '../support/apps';
import { eventually } from '../support/eventually';
import { OrdersDb } from '../support/orders-db';
import { PrivatePostgres } from '../support/private-postgres';
import { privateDatabases, PrivateDatabases } from '../support/private-stack';
import { TestBroker } from '../support/test-broker';
import { TopicReader, waitForTopic } from '../support/topic-reader';
import { WebhookReceiver } from '../support/webhook-receiver';
import { KafkaMessage, Snapshot } from './checker';

/** Marks a statement the harness sends (a comment pg_stat_statements keeps with the text), to tell it from the apps'. */
export const HARNESS_READ = '/* workload harness */';

/** The names each app gives its PostgreSQL sessions (libs/platform postgresOptions). */
export const APPLICATION_NAMES = ['command-api', 'outbox-relay', 'fulfillment', 'notifier'];

/**
 * One app process kept running the way a supervisor would: an exit the harness did not ask for is
 * counted (with the app's last output, as evidence) and the app is started again.
 */
export class Supervised {
  app?: RunningApp;
  unplannedExits: { at: number; exit: string; output: string }[] = [];
  /** True while a start is under way (the harness's or the supervisor's). */
  starting = false;
  private planned = false;
  private closed = false;

  constructor(
    readonly name: AppName,
    readonly env: () => Record<string, string>,
  ) {}

  /** `exitExpected`: the app is meant to end by itself (a crash switch); its exit is the fault, not a failure. */
  async start(extra: Record<string, string> = {}, { exitExpected = false } = {}): Promise<RunningApp> {
    this.planned = exitExpected;
    this.starting = true;
    const app = await startApp(this.name, { ...this.env(), ...extra }).finally(() => (this.starting = false));
    this.app = app;
    app.process.once('exit', (code, signal) => {
      if (this.app !== app || this.planned || this.closed) return;
      this.unplannedExits.push({ at: Date.now(), exit: `${code ?? signal}`, output: app.output().slice(-3000) });
      void this.restartUntilLive();
    });
    return app;
  }

  private async restartUntilLive(): Promise<void> {
    while (!this.closed && !this.planned) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      if (this.closed || this.planned) return;
      try {
        await this.start();
        return;
      } catch (error) {
        this.unplannedExits.push({ at: Date.now(), exit: 'failed to start', output: String(error).slice(-3000) });
      }
    }
  }

  /** Ends the process with `signal` as a planned fault; it stays down until `start`. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    this.planned = true;
    await this.app?.stop(signal);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.planned = true;
    await this.app?.stop('SIGTERM');
  }
}

/**
 * The whole chain on databases and a Kafka broker of its own: two command-api processes by default
 * (requests go to either, as behind a load balancer), two outbox relays,
 * fulfillment and notifier (whose webhook goes to a receiver here). Every scenario uses a tenant of
 * its own, so a snapshot and a topic read are one scenario's rows and messages. With `postgres`, the
 * databases live on a PostgreSQL server of the stack's own, which a scenario may restart.
 */
export class WorkloadStack {
  readonly broker: TestBroker;
  readonly receiver = new WebhookReceiver();
  dbs!: PrivateDatabases;
  orders!: OrdersDb;
  kafka!: Kafka;
  apis: Supervised[] = [];
  relays: Supervised[] = [];
  fulfillment!: Supervised;
  notifier!: Supervised;
  private pools: Record<'orders' | 'fulfillment' | 'notifier', Pool> = {} as never;
  private admin?: Pool;
  private apiTurn = 0;
  /** Commands the workload has in flight, and those cut off without an answer, by command-api URL (the driver's `inFlight`). */
  private readonly inFlight = new Map<string, number>();
  private readonly cutOff = new Map<string, number>();

  /** `apiProcesses`: command-api processes the requests are spread over (2: retries reach either, as behind a load balancer). */
  constructor(
    brokerPort: number,
    private readonly suffix: string,
    readonly postgres?: PrivatePostgres,
    private readonly options: { apiProcesses?: number } = {},
  ) {
    this.broker = new TestBroker(brokerPort);
  }

  async start(): Promise<void> {
    const databases = async () => {
      await this.postgres?.start();
      this.dbs = await privateDatabases(this.suffix, this.postgres);
    };
    await Promise.all([this.broker.start(), this.receiver.start(), databases()]);
    this.kafka = createKafka({ brokers: [this.broker.brokers], clientId: 'workload' });
    this.orders = new OrdersDb(this.dbs.ordersUrl);
    this.pools = {
      orders: new Pool({ connectionString: this.dbs.ordersUrl, max: 2 }),
      fulfillment: new Pool({ connectionString: this.dbs.fulfillmentUrl, max: 2 }),
      notifier: new Pool({ connectionString: this.dbs.notifierUrl, max: 2 }),
    };
    const admin = new URL(this.dbs.ordersUrl);
    admin.pathname = '/postgres';
    this.admin = new Pool({ connectionString: admin.toString(), max: 1, application_name: 'workload-faults' });
    // An idle connection the server dropped (a restart) is replaced on the next query.
    for (const pool of [...Object.values(this.pools), this.admin]) pool.on('error', () => undefined);

    const common = { ...this.dbs.env, KAFKA_BROKERS: this.broker.brokers, LOG_LEVEL: 'warn', KAFKA_SESSION_TIMEOUT_MS: '6000' };
    const apiEnv = () => ({ ...common, READINESS_REQUIRES_KAFKA: 'false', RECEIPT_SWEEP_INTERVAL_SECONDS: '0' });
    this.apis = Array.from({ length: this.options.apiProcesses ?? 2 }, () => new Supervised('command-api', apiEnv));
    const relayEnv = () => ({
      ...common,
      RELAY_POLL_INTERVAL_MS: '200',
      RELAY_BACKOFF_MIN_MS: '100',
      RELAY_BACKOFF_MAX_MS: '2000',
      RELAY_HEARTBEAT_MS: '500',
      OUTBOX_CLEANUP_INTERVAL_SECONDS: '0',
    });
    this.relays = [new Supervised('outbox-relay', relayEnv), new Supervised('outbox-relay', relayEnv)];
    this.fulfillment = new Supervised('fulfillment', () => ({
      ...common,
      FULFILLMENT_RETRY_MIN_MS: '50',
      FULFILLMENT_RETRY_MAX_MS: '1000',
    }));
    this.notifier = new Supervised('notifier', () => ({
      ...common,
      WEBHOOK_URL: this.receiver.url,
      WEBHOOK_RETRY_SCHEDULE: '100ms,500ms,1s,2s,2s,2s,2s,2s,2s,2s',
      NOTIFIER_RETRY_MIN_MS: '50',
      NOTIFIER_RETRY_MAX_MS: '1000',
    }));
    await this.relays[0].start(); // creates the topics
    await waitForTopic(this.kafka, Topics.orderEvents, 60_000);
    await Promise.all([...this.apis.map((api) => api.start()), this.relays[1].start(), this.fulfillment.start(), this.notifier.start()]);
  }

  /**
   * A command-api to send the next request to: the live ones in turn, as a load balancer whose health
   * check has seen a process go does (a process killed meanwhile fails the requests it has). While none
   * is live, any: the request fails, and the client resolves its outcome as after any lost reply.
   */
  get apiUrl(): string {
    const started = this.apis.filter((api) => api.app !== undefined);
    const live = started.filter((api) => !api.starting && api.app!.process.exitCode === null && api.app!.process.signalCode === null);
    const candidates = live.length > 0 ? live : started;
    return candidates[this.apiTurn++ % candidates.length].app!.url;
  }

  /** The driver's `inFlight` hook: counts commands in flight, and those cut off, per command-api. */
  trackRequest(apiUrl: string, change: 1 | -1, cutOff = false): void {
    this.inFlight.set(apiUrl, (this.inFlight.get(apiUrl) ?? 0) + change);
    if (cutOff) this.cutOff.set(apiUrl, (this.cutOff.get(apiUrl) ?? 0) + 1);
  }

  /** Commands in flight to `api`'s current process, and those it cut off (the driver's counts). */
  requestsInFlight(api: Supervised): number {
    return api.app ? (this.inFlight.get(api.app.url) ?? 0) : 0;
  }

  requestsCutOff(api: Supervised): number {
    return api.app ? (this.cutOff.get(api.app.url) ?? 0) : 0;
  }

  /** Until `api` has a command in flight (checked every millisecond), at most `timeoutMs`; then whatever moment it is. */
  async whenBusy(api: Supervised, timeoutMs: number): Promise<void> {
    await eventually(
      () => this.requestsInFlight(api),
      (inFlight) => inFlight > 0,
      { timeoutMs, intervalMs: 1 },
    ).catch(() => undefined);
  }

  /** Starts every app whose process is gone (a fault that failed half-way), and the broker if it is down. */
  async ensureRunning(): Promise<void> {
    if (!(await this.brokerAnswers())) await this.broker.start({ keepData: true });
    for (const app of this.supervised()) {
      const gone = !app.app || app.app.process.exitCode !== null || app.app.process.signalCode !== null;
      if (gone && !app.starting) await app.start();
    }
  }

  private async brokerAnswers(): Promise<boolean> {
    const admin = this.kafka.admin();
    try {
      await admin.connect();
      await admin.listTopics();
      return true;
    } catch {
      return false;
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }

  /** The apps this stack created; fewer than all when `start` failed half-way. */
  supervised(): Supervised[] {
    return [...this.apis, ...this.relays, this.fulfillment, this.notifier].filter((app): app is Supervised => app !== undefined);
  }

  /** Terminates every session the apps hold in this stack's databases, wherever each one is in its transaction. */
  async terminateBackends(): Promise<number> {
    const names = [this.dbs.ordersUrl, this.dbs.fulfillmentUrl, this.dbs.notifierUrl].map((url) =>
      decodeURIComponent(new URL(url).pathname.slice(1)),
    );
    const { rows } = await this.admin!.query(
      /* sql */ `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS terminated
       FROM pg_stat_activity WHERE datname = ANY($1) AND application_name = ANY($2) AND pid <> pg_backend_pid()`,
      [names, APPLICATION_NAMES],
    );
    return rows[0].terminated;
  }

  /**
   * True once every outbox row of the tenant is published, both consumers have an inbox row for each, and
   * no webhook is pending. Its statements say they are the harness's (HARNESS_READ), for counts of the apps' own.
   */
  async drained(tenantId: string): Promise<boolean> {
    const { rows } = await this.pools.orders.query(
      `${HARNESS_READ} SELECT id::text, published_at IS NOT NULL AS published FROM outbox_messages WHERE tenant_id = $1`,
      [tenantId],
    );
    if (rows.some((row) => !row.published)) return false;
    const ids = rows.map((row) => row.id);
    for (const [pool, consumer] of [
      [this.pools.fulfillment, 'fulfillment'],
      [this.pools.notifier, 'notifier'],
    ] as const) {
      const { rows: handled } = await pool.query(
        `${HARNESS_READ} SELECT count(*)::int AS n FROM inbox_messages WHERE consumer = $1 AND message_id = ANY($2::uuid[])`,
        [consumer, ids],
      );
      if (handled[0].n < ids.length) return false;
    }
    const { rows: pending } = await this.pools.notifier.query(
      `${HARNESS_READ} SELECT count(*)::int AS n FROM webhook_deliveries WHERE tenant_id = $1 AND state = 'pending'`,
      [tenantId],
    );
    return pending[0].n === 0;
  }

  async snapshot(tenantId: string): Promise<Snapshot> {
    const q = async (pool: Pool, sql: string, params: unknown[]) => (await pool.query(sql, params)).rows;
    const [orders, receipts, outbox] = await Promise.all([
      q(this.pools.orders, 'SELECT id::text, status FROM orders WHERE tenant_id = $1', [tenantId]),
      q(
        this.pools.orders,
        `SELECT operation, idempotency_key AS key, response_status AS "responseStatus", effect_id AS "effectId"
         FROM idempotency_receipts WHERE tenant_id = $1`,
        [tenantId],
      ),
      q(
        this.pools.orders,
        `SELECT id::text, sequence::int, message_key AS "messageKey", event_type AS "eventType", published_at IS NOT NULL AS published
         FROM outbox_messages WHERE tenant_id = $1`,
        [tenantId],
      ),
    ]);
    const ids = outbox.map((row) => row.id);
    const [shipments, cancelledMarkers, fulfillmentInbox, notifierInbox, webhookDeliveries] = await Promise.all([
      q(
        this.pools.fulfillment,
        'SELECT order_id::text AS "orderId", status, message_id::text AS "messageId" FROM shipments WHERE tenant_id = $1',
        [tenantId],
      ),
      q(this.pools.fulfillment, 'SELECT order_id::text AS "orderId" FROM cancelled_orders WHERE tenant_id = $1', [tenantId]),
      q(
        this.pools.fulfillment,
        'SELECT consumer, message_id::text AS "messageId", outcome FROM inbox_messages WHERE message_id = ANY($1::uuid[])',
        [ids],
      ),
      q(
        this.pools.notifier,
        'SELECT consumer, message_id::text AS "messageId", outcome FROM inbox_messages WHERE message_id = ANY($1::uuid[])',
        [ids],
      ),
      q(
        this.pools.notifier,
        'SELECT message_id::text AS "messageId", order_id::text AS "orderId", state, last_error AS "lastError" FROM webhook_deliveries WHERE tenant_id = $1',
        [tenantId],
      ),
    ]);
    return {
      orders,
      receipts,
      outbox,
      shipments,
      cancelledMarkers,
      inbox: [...fulfillmentInbox, ...notifierInbox],
      webhookDeliveries,
      webhookPosts: this.receiver
        .forTenant(tenantId)
        .map((r) => ({ messageId: r.idempotencyKey ?? '', orderId: r.body.data.orderId, type: r.body.type, status: r.status })),
    } as Snapshot;
  }

  /** The tenant's messages on the topic, read from the beginning until every id in `expected` was seen (or `timeoutMs`). */
  async readTopic(tenantId: string, expected: string[], timeoutMs = 60_000): Promise<KafkaMessage[]> {
    const reader = new TopicReader(this.kafka, tenantId);
    await reader.start();
    try {
      await reader
        .until((messages) => {
          const seen = new Set(messages.map((m) => m.headers[Headers.messageId]));
          return expected.every((id) => seen.has(id));
        }, timeoutMs)
        .catch(() => undefined); // what is missing is the checker's finding
      await new Promise((resolve) => setTimeout(resolve, 1_000)); // copies right behind the last one
    } finally {
      await reader.stop();
    }
    return reader.messages.map((m) => ({
      partition: m.partition,
      offset: Number(m.offset),
      key: m.key,
      messageId: m.headers[Headers.messageId],
      eventType: m.headers[Headers.eventType],
    }));
  }

  async stop(): Promise<void> {
    await Promise.all(this.supervised().map((s) => s.close().catch(() => undefined)));
    await this.receiver.stop().catch(() => undefined);
    await Promise.all(Object.values(this.pools).map((pool) => pool.end().catch(() => undefined)));
    await this.admin?.end().catch(() => undefined);
    await this.orders?.close().catch(() => undefined);
    await this.broker.destroy().catch(() => undefined);
    await this.postgres?.destroy().catch(() => undefined);
  }
}
