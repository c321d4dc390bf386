import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Counter, Gauge, Histogram, register } from 'prom-client';
import { DataSource } from 'typeorm';
import { outboxBacklog } from '@app/outbox';

/** The relay's Prometheus metrics. Backlog figures are read from the outbox table at scrape time. */
@Injectable()
export class RelayMetrics {
  readonly published = new Counter({ name: 'outbox_published_total', help: 'Outbox rows published to Kafka' });
  readonly rejected = new Counter({
    name: 'outbox_rejected_total',
    help: 'Outbox rows Kafka refused for their own sake (parked)',
  });
  readonly failures = new Counter({
    name: 'outbox_publish_failures_total',
    help: 'Batches that failed and were rolled back, by cause',
    labelNames: ['cause'],
  });
  readonly batchSeconds = new Histogram({
    name: 'outbox_batch_duration_seconds',
    help: "From a batch's hand-over to Kafka to the commit of its mark",
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  });
  readonly claimSeconds = new Histogram({
    name: 'outbox_claim_duration_seconds',
    help: 'One claim of the next batch in PostgreSQL, empty claims included (a rise at a steady rate: the unpublished index wants a vacuum)',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  });
  readonly ownedShards = new Gauge({ name: 'outbox_relay_owned_shards', help: 'Shards this instance owns' });
  readonly kafkaUp = new Gauge({ name: 'outbox_relay_kafka_up', help: '1 when the last publish attempt reached Kafka' });
  readonly sessionsEnded = new Counter({
    name: 'outbox_relay_sessions_ended_total',
    help: 'Sessions of relay instances gone silent that still held shards, ended by this instance so the shards could move',
  });

  constructor(@InjectDataSource() dataSource: DataSource) {
    let snapshot: Promise<Awaited<ReturnType<typeof outboxBacklog>> | undefined> | undefined;
    // One query per scrape serves all three gauges.
    const read = () =>
      (snapshot ??= outboxBacklog(dataSource.manager)
        .catch(() => undefined)
        .finally(() => setTimeout(() => (snapshot = undefined), 100)));
    new Gauge({
      name: 'outbox_backlog_messages',
      help: 'Unpublished outbox rows (parked included)',
      async collect() {
        const backlog = await read();
        if (backlog) this.set(backlog.unpublished);
      },
    });
    new Gauge({
      name: 'outbox_oldest_unpublished_age_seconds',
      help: 'Age of the oldest unpublished row; 0 when there is none',
      async collect() {
        const backlog = await read();
        if (backlog) this.set(backlog.oldestUnpublishedAgeSeconds ?? 0);
      },
    });
    new Gauge({
      name: 'outbox_parked_messages',
      help: 'Rows Kafka refused, waiting for an operator; later rows of their keys wait too',
      async collect() {
        const backlog = await read();
        if (backlog) this.set(backlog.parked);
      },
    });
  }
}

export { register as metricsRegistry };
