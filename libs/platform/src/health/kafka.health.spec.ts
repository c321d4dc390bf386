import { AddressInfo, createServer } from 'node:net';
import { ConfigService } from '@nestjs/config';
import { HealthIndicatorService } from '@nestjs/terminus';
import * as kafkaClient from '../kafka/kafka-client';
import { KAFKA_CHECK_CACHE_MS, KafkaHealthIndicator } from './kafka.health';

describe('KafkaHealthIndicator', () => {
  afterEach(() => jest.restoreAllMocks());

  it('stops knocking on a dead broker once the check has answered', async () => {
    // A "broker" that hangs up on every connection: each attempt the client makes is counted.
    let attempts = 0;
    const server = createServer((socket) => {
      attempts++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const indicator = new KafkaHealthIndicator(new HealthIndicatorService(), new ConfigService({ KAFKA_BROKERS: [`127.0.0.1:${port}`] }));
      expect(await indicator.isHealthy('kafka', 500)).toMatchObject({ kafka: { status: 'down' } });
      const answeredAfter = attempts;
      // Past the client's first retry delays: a connection loop left behind would have knocked again.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect({ answeredAfter, laterAttempts: attempts - answeredAfter }).toEqual({ answeredAfter: expect.any(Number), laterAttempts: 0 });
    } finally {
      server.close();
    }
  });

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
