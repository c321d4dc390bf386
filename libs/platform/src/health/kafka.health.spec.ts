import { ConfigService } from '@nestjs/config';
import { HealthIndicatorService } from '@nestjs/terminus';
import * as kafkaClient from '../kafka/kafka-client';
import { KAFKA_CHECK_CACHE_MS, KafkaHealthIndicator } from './kafka.health';

describe('KafkaHealthIndicator', () => {
  afterEach(() => jest.restoreAllMocks());

  it('opens one broker connection per KAFKA_CHECK_CACHE_MS however often readiness is probed', async () => {
    const created = jest.spyOn(kafkaClient, 'createKafka');
    let now = 1_000_000;
    jest.spyOn(Date, 'now').mockImplementation(() => now);
    // Nothing listens on port 1: every real check is down at once, with the driver's reason.
    const indicator = new KafkaHealthIndicator(new HealthIndicatorService(), new ConfigService({ KAFKA_BROKERS: ['127.0.0.1:1'] }));

    const burst = await Promise.all(Array.from({ length: 5 }, () => indicator.isHealthy('kafka', 500)));
    now += KAFKA_CHECK_CACHE_MS - 1;
    const later = await indicator.isHealthy('kafka', 500);
    expect(created).toHaveBeenCalledTimes(1);
    for (const result of [...burst, later]) expect(result).toMatchObject({ kafka: { status: 'down' } });

    now += 1;
    await indicator.isHealthy('kafka', 500);
    expect(created).toHaveBeenCalledTimes(2);
  });
});
