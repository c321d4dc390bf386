import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { ConfigService } from '@nestjs/config';
import { createKafka } from '../kafka/kafka-client';

/** Up when a broker answers a metadata request within `timeoutMs`. Uses a short-lived admin client so a dead broker cannot wedge it. */
@Injectable()
export class KafkaHealthIndicator {
  constructor(
    private readonly indicators: HealthIndicatorService,
    private readonly config: ConfigService,
  ) {}

  async isHealthy(key = 'kafka', timeoutMs = 2_000) {
    const indicator = this.indicators.check(key);
    const brokers = this.config.get<string[]>('KAFKA_BROKERS') ?? [];
    const admin = createKafka({ brokers, clientId: 'health', connectionTimeoutMs: timeoutMs }).admin({
      retry: { retries: 0 },
    });
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
