import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const infra = join(__dirname, '..', '..', 'scripts', 'infra.sh');

/**
 * A private Kafka broker for a suite that stops and starts Kafka, so the shared broker other suites
 * use is never touched. Same jars as `scripts/infra.sh up`; its own ports, data dir, pid and log.
 */
export class TestBroker {
  private readonly dir = mkdtempSync(join(tmpdir(), 'e2e-kafka-'));

  /** `advertisedPort`: where clients are told to connect, a proxy's port in front of `port` (KafkaFaultProxy). */
  constructor(
    readonly port: number,
    private readonly controllerPort = port + 1,
    private readonly advertisedPort = port,
  ) {}

  /** The bootstrap address clients use: the advertised one. */
  get brokers(): string {
    return `127.0.0.1:${this.advertisedPort}`;
  }

  /** Starts the broker; `keepData` restarts it with the topics and offsets it had. */
  async start({ keepData = false } = {}): Promise<void> {
    await run('bash', [infra, 'up'], { env: this.env({ KAFKA_KEEP_DATA: keepData ? '1' : '0' }), timeout: 120_000 });
  }

  async stop(): Promise<void> {
    await run('bash', [infra, 'down'], { env: this.env({}), timeout: 60_000 });
  }

  async destroy(): Promise<void> {
    await this.stop().catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }

  private env(extra: Record<string, string>): NodeJS.ProcessEnv {
    return {
      ...process.env,
      // Its own address, so that infra.sh starts it rather than using a broker KAFKA_BROKERS names.
      KAFKA_BROKERS: `127.0.0.1:${this.port}`,
      KAFKA_STATE_DIR: this.dir,
      KAFKA_PORT: String(this.port),
      KAFKA_CONTROLLER_PORT: String(this.controllerPort),
      KAFKA_ADVERTISED_PORT: String(this.advertisedPort),
      INFRA_USE_DOCKER: '0',
      ...extra,
    };
  }
}
