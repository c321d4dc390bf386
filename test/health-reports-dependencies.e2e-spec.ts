import { RunningApp, startApp } from './support/apps';
import { TcpProxy } from './support/tcp-proxy';
import { testEnv } from './support/test-env';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function get(app: RunningApp, path: string) {
  const response = await fetch(`${app.url}${path}`);
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, any> };
}

describe('health endpoints', () => {
  const running: RunningApp[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((app) => app.stop()));
  });
  async function start(...args: Parameters<typeof startApp>) {
    const app = await startApp(...args);
    running.push(app);
    return app;
  }

  it.each(['command-api', 'outbox-relay', 'fulfillment'] as const)(
    '%s is live and ready when PostgreSQL and Kafka answer',
    async (name) => {
      const app = await start(name);
      expect(await get(app, '/health/live')).toMatchObject({ status: 200, body: { status: 'ok' } });
      const ready = await get(app, '/health/ready');
      expect(ready.status).toBe(200);
      expect(ready.body).toMatchObject({ status: 'ok', info: { kafka: { status: 'up' } } });
      expect(Object.keys(ready.body.info)).toHaveLength(2);
    },
  );

  it.each(['outbox-relay', 'fulfillment'] as const)('%s answers a body no route takes with a 4xx problem, not a 500', async (name) => {
    const app = await start(name);
    for (const body of [JSON.stringify({ pad: 'x'.repeat(300_000) }), '{"unterminated":']) {
      const response = await fetch(`${app.url}/health/ready`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
      expect({ status: response.status, contentType: response.headers.get('content-type') }).toEqual({
        status: 404,
        contentType: expect.stringMatching(/^application\/problem\+json/),
      });
    }
  });

  it('stays live but answers 503 problem+json naming kafka when no broker answers', async () => {
    const app = await start('command-api', { KAFKA_BROKERS: '127.0.0.1:1' });
    expect((await get(app, '/health/live')).status).toBe(200);
    const ready = await get(app, '/health/ready');
    expect(ready.status).toBe(503);
    expect(ready.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(ready.headers.get('retry-after')).toBe('5');
    expect(ready.body).toMatchObject({
      type: '/problems/dependency-unavailable',
      status: 503,
      unavailable: ['kafka'],
      checks: { orders: { status: 'up' }, kafka: { status: 'down' } },
    });
    expect(ready.body.detail).toBe('kafka is down');
    // Any caller may ask: the answer names what is down, never the driver's reason (hosts, ports, users).
    expect(JSON.stringify(ready.body)).not.toMatch(/127\.0\.0\.1|:1\b|ECONNREFUSED|connect|timeout|no answer/i);
    // The operator finds the reason in the log, once per outage, not once per probe.
    await get(app, '/health/ready');
    const notReady = app
      .output()
      .split('\n')
      .filter((line) => line.includes('not ready: kafka down'));
    expect(notReady).toHaveLength(1);
    expect(JSON.parse(notReady[0])).toMatchObject({ level: 40, down: { kafka: expect.stringMatching(/\S/) } });
  });

  // A partition, not a refusal: nothing comes back on the pool's open connections. The probe must still
  // answer within its bound (the ping's 2 s), or the orchestrator's probe times out with no reason given.
  it('answers 503 naming the database, within seconds, when the database stops answering', async () => {
    const url = new URL(testEnv.ordersUrl);
    const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(proxy.port);
    try {
      const app = await start('command-api', { ORDERS_DATABASE_URL: url.toString() });
      expect((await get(app, '/health/ready')).status).toBe(200);
      proxy.freeze();
      await pause(1_100); // past the one-second answer every probe shares
      const asked = Date.now();
      const ready = await get(app, '/health/ready');
      expect({ status: ready.status, unavailable: ready.body.unavailable, detail: ready.body.detail }).toEqual({
        status: 503,
        unavailable: ['orders'],
        detail: 'orders is down',
      });
      expect(Date.now() - asked).toBeLessThan(5_000);
      expect((await get(app, '/health/live')).status).toBe(200);
    } finally {
      await proxy.cut();
    }
  }, 30_000);

  it('answers a flood of readiness probes with one database ping a second, not one each', async () => {
    const url = new URL(testEnv.ordersUrl);
    const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(proxy.port);
    try {
      const app = await start('command-api', { ORDERS_DATABASE_URL: url.toString(), RECEIPT_SWEEP_INTERVAL_SECONDS: '0' });
      // What one ping sends, on a connection already open (the first probe may open one).
      let ping = 0;
      for (let probe = 0; probe < 2; probe++) {
        await pause(1_100); // past the answer the probe before left
        const before = proxy.sent;
        expect((await get(app, '/health/ready')).status).toBe(200);
        ping = proxy.sent - before;
      }
      expect(ping).toBeGreaterThan(0);
      await pause(1_100);

      const started = Date.now();
      const floodBefore = proxy.sent;
      const answers = await Promise.all(Array.from({ length: 200 }, () => get(app, '/health/ready')));
      const seconds = Math.ceil((Date.now() - started) / 1000);
      expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
      // Until 2026-12-07 each probe pinged the database over a connection of the pool: 200 pings here.
      expect(Math.round((proxy.sent - floodBefore) / ping)).toBeLessThanOrEqual(seconds + 1);
    } finally {
      await proxy.cut();
    }
  });

  it('leaves Kafka out of API readiness when READINESS_REQUIRES_KAFKA=false', async () => {
    const app = await start('command-api', { KAFKA_BROKERS: '127.0.0.1:1', READINESS_REQUIRES_KAFKA: 'false' });
    const ready = await get(app, '/health/ready');
    expect(ready).toMatchObject({ status: 200, body: { info: { orders: { status: 'up' } } } });
    expect(ready.body.info.kafka).toBeUndefined();
  });

  it('closes its connections and exits on SIGTERM', async () => {
    const app = await startApp('fulfillment');
    const started = Date.now();
    const before = app.output().length;
    // Nest closes the app, then re-raises the signal so the exit status still says SIGTERM.
    expect(await app.stop('SIGTERM')).toEqual({ code: null, signal: 'SIGTERM' });
    expect(Date.now() - started).toBeLessThan(5_000);
    // No error from shutting down. The app joins the shared consumer group, so it may still be handling
    // messages other suites produce, hostile ones among them: their verdicts (a line with an `outcome`,
    // such as a dead-lettered malformed message) are the consumer at work, not the shutdown.
    const errors = app
      .output()
      .slice(before)
      .split('\n')
      .filter((line) => /"level":(50|60)/.test(line))
      .filter((line) => (JSON.parse(line) as { outcome?: string }).outcome === undefined);
    expect(errors).toEqual([]);
  });
});
