import { ConfigService } from '@nestjs/config';
import { Command } from 'nest-commander';
import { HEARTBEATS_BEFORE_GONE, lastPublishAt, outboxBacklog, parkedMessages, relayInstances } from '@app/outbox';
import { OpsConfig } from '../config';
import { OrdersDatabase } from '../orders-database.module';
import { duration } from '../output';
import { OpsCommand } from '../ops-command';

const PARKED_SHOWN = 10;

type OutboxStatus = Awaited<ReturnType<OutboxStatusCommand['status']>>;

@Command({
  name: 'outbox:status',
  description: 'Outbox backlog, parked rows, relay instances and the shards they own, last publish',
})
export class OutboxStatusCommand extends OpsCommand<{ json?: boolean }> {
  protected readonly jsonShape = '{backlog, lastPublishAt, staleAfterSeconds, relays, unownedShards, parked}';

  private readonly shardCount: number;
  private readonly staleAfterSeconds: number;

  constructor(
    private readonly db: OrdersDatabase,
    config: ConfigService<OpsConfig, true>,
  ) {
    super();
    this.shardCount = config.get('RELAY_SHARDS', { infer: true });
    this.staleAfterSeconds = (HEARTBEATS_BEFORE_GONE * config.get('RELAY_HEARTBEAT_MS', { infer: true })) / 1000;
  }

  async run(_: string[], options: { json?: boolean }): Promise<void> {
    const status = await this.status();
    this.report(options, status, () => describe(status));
  }

  async status() {
    const manager = await this.db.manager();
    const backlog = await outboxBacklog(manager);
    const lastPublish = await lastPublishAt(manager);
    const relays = (await relayInstances(manager)).map((relay) => ({
      instanceId: relay.instanceId,
      shards: relay.shards,
      heartbeatAgeSeconds: Math.round(relay.heartbeatAgeSeconds * 10) / 10,
      stale: relay.heartbeatAgeSeconds > this.staleAfterSeconds,
      startedAt: relay.startedAt.toISOString(),
      lastPublishAt: relay.lastPublishAt?.toISOString() ?? null,
    }));
    const owned = new Set(relays.filter((relay) => !relay.stale).flatMap((relay) => relay.shards));
    const parked = await parkedMessages(manager, PARKED_SHOWN);
    return {
      backlog,
      lastPublishAt: lastPublish?.toISOString() ?? null,
      staleAfterSeconds: this.staleAfterSeconds,
      relays,
      unownedShards: [...Array(this.shardCount).keys()].filter((shard) => !owned.has(shard)),
      parked: parked.map((row) => ({
        id: row.id,
        topic: row.topic,
        key: row.key,
        eventType: row.eventType,
        tenantId: row.tenantId,
        createdAt: row.createdAt.toISOString(),
        parkedAt: row.parkedAt.toISOString(),
        attempts: row.attempts,
        lastError: row.lastError,
      })),
    };
  }
}

function describe(status: OutboxStatus): string {
  const { backlog } = status;
  const lines = [
    `Backlog: ${backlog.unpublished} unpublished (${backlog.parked} parked)` +
      (backlog.oldestUnpublishedAgeSeconds === null ? '' : `, oldest ${duration(backlog.oldestUnpublishedAgeSeconds)} old`),
    `Last publish: ${status.lastPublishAt ?? 'never (or no longer on record)'}`,
    `Relays (stale after ${duration(status.staleAfterSeconds)} without a heartbeat):`,
    ...(status.relays.length
      ? status.relays.map(
          (relay) =>
            `  ${relay.instanceId}  shards ${relay.shards.join(',') || '-'}  heartbeat ${duration(relay.heartbeatAgeSeconds)} ago` +
            `${relay.lastPublishAt ? `  last publish ${relay.lastPublishAt}` : ''}${relay.stale ? '  STALE' : ''}`,
        )
      : ['  none: nothing publishes the outbox']),
    `Unowned shards: ${status.unownedShards.length ? status.unownedShards.join(',') : 'none'}`,
  ];
  if (status.parked.length) {
    lines.push(`Parked (oldest ${status.parked.length} of ${backlog.parked}; each holds back the later events of its key):`);
    for (const row of status.parked) {
      lines.push(
        `  ${row.id}  ${row.topic}  key ${row.key}  ${row.eventType}  parked ${row.parkedAt}  attempts ${row.attempts}: ${row.lastError ?? ''}`,
      );
    }
  }
  return lines.join('\n');
}
