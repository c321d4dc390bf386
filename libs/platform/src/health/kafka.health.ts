import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { ConfigService } from '@nestjs/config';
import { createKafka } from '../kafka/kafka-client';

/** A readiness probe every second from each of several callers still costs one broker connection per this long. */
export const KAFKA_CHECK_CACHE_MS = 2_000;

/**
 * Up when a broker answers a metadata request within `timeoutMs`. Uses a short-lived admin client so
 * a dead broker cannot wedge it; its answer (or the check in flight) is shared for KAFKA_CHECK_CACHE_MS,
 * so probes cannot open a connection each.
 */
@Injectable()
export class KafkaHealthIndicator {
  private last?: { startedAt: number; result: ReturnType<KafkaHealthIndicator['check']> };

  constructor(
    private readonly indicators: HealthIndicatorService,
    private readonly config: ConfigService,
  ) {}

  isHealthy(key = 'kafka', timeoutMs = 2_000) {
    if (this.last && Date.now() - this.last.startedAt < KAFKA_CHECK_CACHE_MS) return this.last.result;
    const result = this.check(key, timeoutMs);
    this.last = { startedAt: Date.now(), result };
    return result;
  }

  private async check(key: string, timeoutMs: number) {
    const indicator = this.indicators.check(key);
    const brokers = this.config.get<string[]>('KAFKA_BROKERS') ?? [];
    // No retries at the client's level either: its connection loop would outlive the answer by up to a
    // minute per probe of a dead broker (eight attempts, backoff to 10 s) after the timeout gave up on it.
    const admin = createKafka({ brokers, clientId: 'health', connectionTimeoutMs: timeoutMs, retry: { retries: 0 } }).admin();
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      });
      const cluster = await Promise.race([admin.connect().then(() => admin.describeCluster()), timeout]);
      return indicator.up({ brokers: cluster.brokers.length });
    } catch (error) {
      return indicator.down({ message: (error as Error).message });
    } finally {
      clearTimeout(timer);
      void admin.disconnect().catch(() => undefined);
    }
  }
}
