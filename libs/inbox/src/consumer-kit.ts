import { BeforeApplicationShutdown, OnApplicationBootstrap, Provider, Type } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { getDataSourceToken } from '@nestjs/typeorm';
import { PinoLogger } from 'nestjs-pino';
import { Counter, Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { z } from 'zod';
import { backoffDelay, createKafka, envFields, Queryable } from '@app/platform';
import { ConsumerOutcome, InboxConsumer } from './inbox-consumer';
import { InboxHandler } from './inbox';
import { InboxMessage } from './inbox-message';
import { ConsumedEvent, EventContract, readEvent } from './read-event';

/**
 * The consumer kit: a new consumer is an `EventHandler`, the zod schemas of the events it reads (an
 * `EventContract` in libs/contracts) and one line in its app module:
 *
 *     providers: [...inboxConsumer({ name: 'fulfillment', topics: [Topics.orderEvents], contract: orderEventContract, handler: ShipmentsHandler })]
 *
 * with `...consumerConfig('FULFILLMENT', …)` in its config schema. The kit brings the rest: the inbox
 * (each message-id applied once, offsets committed after the database commit), retries with the
 * project's backoff, dead letters, the retention it declares and sweeps, `<name>_messages_total` and
 * `<name>_consumer_lag` metrics, start and graceful stop with the app. See docs/consumers.md.
 */
export interface EventHandler<S extends Record<string, z.ZodType>> {
  /**
   * Applies a batch's events (new message-ids only, in partition order) inside the inbox transaction:
   * throw to roll the batch back (`MalformedMessage` when retrying cannot help). Messages the contract
   * does not cover never reach it: they are recorded as `skipped`.
   */
  handle(db: Queryable, events: ConsumedEvent<S>[]): Promise<void>;
  /** After the commit, once per message, with what became of it. */
  onOutcome?(outcome: ConsumerOutcome, message: InboxMessage): void;
}

export interface ConsumerDefinition<S extends Record<string, z.ZodType>> {
  /** Kafka group id, inbox key, metric prefix; its settings are `<NAME>_MAX_ATTEMPTS` and so on (consumerConfig). */
  name: string;
  topics: string[];
  contract: EventContract<S>;
  handler: Type<EventHandler<S>>;
  /** Where messages go that failed `<NAME>_MAX_ATTEMPTS` times or can never be read. */
  deadLetterTopic: string;
}

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const sharedFields = {
  KAFKA_BROKERS: envFields.kafkaBrokers,
  /** How long message-ids are remembered. Outbox replays must not reach further back (ops refuses). */
  INBOX_RETENTION_SECONDS: int(60, 365 * 24 * 3600).default(14 * 24 * 3600),
  /** How often inbox rows past the retention are deleted; 0 never. */
  INBOX_SWEEP_INTERVAL_SECONDS: int(0, 24 * 3600).default(3600),
  /** How long Kafka waits for a silent consumer before rebalancing its partitions (broker minimum 6000). */
  KAFKA_SESSION_TIMEOUT_MS: int(6_000, 300_000).default(30_000),
  /**
   * Partitions applied at once, each in a transaction on its own connection (order is per partition).
   * Must stay below DATABASE_POOL_SIZE: the sweep, health checks and the app's own work need connections too.
   */
  KAFKA_PARTITIONS_CONCURRENTLY: int(1, 64).default(4),
  /** Test-only: SIGKILL itself after a database commit, before the offset commit. Accepted only with NODE_ENV=test. */
  CRASH_AFTER_DATABASE_COMMIT: envFields.flag(false),
};

const ownFields = ({ maxAttempts, retryMaxMs }: { maxAttempts: number; retryMaxMs: number }) => ({
  /** Attempts before a failing message goes to the dead-letter topic (database outages are not counted). */
  MAX_ATTEMPTS: int(1, 100).default(maxAttempts),
  /** The first retry's wait; each further one doubles the ceiling of a random wait, up to RETRY_MAX_MS. */
  RETRY_MIN_MS: int(1, 60_000).default(200),
  RETRY_MAX_MS: int(1, 600_000).default(retryMaxMs),
});

type Prefixed<P extends string, T> = { [K in keyof T & string as `${P}_${K}`]: T[K] };

/** The settings a kit consumer reads, to spread into its app's config schema (check them with `consumerConfigRules`). */
export function consumerConfig<P extends string>(prefix: P, defaults: { maxAttempts: number; retryMaxMs: number }) {
  const own = Object.fromEntries(Object.entries(ownFields(defaults)).map(([key, field]) => [`${prefix}_${key}`, field]));
  return { ...sharedFields, ...own } as typeof sharedFields & Prefixed<P, ReturnType<typeof ownFields>>;
}

/** The cross-field rules of `consumerConfig`, for the app schema's `.superRefine`. */
export function consumerConfigRules(prefix: string) {
  return (config: Record<string, unknown>, ctx: z.RefinementCtx): void => {
    if ((config[`${prefix}_RETRY_MIN_MS`] as number) > (config[`${prefix}_RETRY_MAX_MS`] as number)) {
      ctx.addIssue({ code: 'custom', path: [`${prefix}_RETRY_MIN_MS`], message: `must not exceed ${prefix}_RETRY_MAX_MS` });
    }
    const poolSize = config.DATABASE_POOL_SIZE as number | undefined;
    if (poolSize !== undefined && (config.KAFKA_PARTITIONS_CONCURRENTLY as number) >= poolSize) {
      ctx.addIssue({
        code: 'custom',
        path: ['KAFKA_PARTITIONS_CONCURRENTLY'],
        message: `must be below DATABASE_POOL_SIZE (${poolSize}): each partition in flight holds a connection`,
      });
    }
    if (config.CRASH_AFTER_DATABASE_COMMIT && config.NODE_ENV !== 'test') {
      ctx.addIssue({
        code: 'custom',
        path: ['CRASH_AFTER_DATABASE_COMMIT'],
        message: 'is a test-only switch (it crash-loops the consumer on every message): it needs NODE_ENV=test',
      });
    }
  };
}

/** The handler as the inbox calls it: messages read against the contract, the ones it covers handed on. */
export function contractHandler<S extends Record<string, z.ZodType>>(contract: EventContract<S>, handler: EventHandler<S>): InboxHandler {
  return async (db, messages) => {
    // Read them all first: a malformed message fails the batch before any statement runs.
    const events = messages.map((message) => readEvent(message, contract));
    const covered = events.filter((event) => event !== undefined);
    if (covered.length) await handler.handle(db, covered);
    return events.map((event) => (event ? 'applied' : 'skipped'));
  };
}

/** Starts the consumer with the app and stops it (the batch in flight committed) before the app closes. */
class ConsumerLifecycle implements OnApplicationBootstrap, BeforeApplicationShutdown {
  constructor(private readonly consumer: InboxConsumer) {}

  onApplicationBootstrap(): Promise<void> {
    return this.consumer.run();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.consumer.stop();
  }
}

/** The providers of one kit consumer: its handler and the running consumer. */
export function inboxConsumer<S extends Record<string, z.ZodType>>(definition: ConsumerDefinition<S>): Provider[] {
  const { name, topics, contract, handler: handlerType, deadLetterTopic } = definition;
  const prefix = name.toUpperCase().replace(/[^A-Z0-9]/g, '_');
  return [
    handlerType,
    {
      provide: `${name} inbox consumer`,
      inject: [getDataSourceToken(), PinoLogger, ConfigService, handlerType],
      useFactory: (dataSource: DataSource, logger: PinoLogger, config: ConfigService, handler: EventHandler<S>) => {
        logger.setContext(`${name} consumer`);
        const get = <T>(key: string) => config.get<T>(key) as T;
        const retry = { minMs: get<number>(`${prefix}_RETRY_MIN_MS`), maxMs: get<number>(`${prefix}_RETRY_MAX_MS`) };
        const messages = new Counter({
          name: `${name}_messages_total`,
          help: 'Messages by what became of them: applied, skipped, duplicate, dead-lettered, dead-letter-refused (in dead_letters only)',
          labelNames: ['outcome'],
        });
        const lag = new Gauge({
          name: `${name}_consumer_lag`,
          help: 'Messages behind the partition end',
          labelNames: ['topic', 'partition'],
        });
        return new ConsumerLifecycle(
          new InboxConsumer({
            name,
            kafka: createKafka({ brokers: get<string[]>('KAFKA_BROKERS'), clientId: name, logger: logger.logger }),
            topics,
            dataSource,
            handler: contractHandler(contract, handler),
            deadLetterTopic,
            maxAttempts: get<number>(`${prefix}_MAX_ATTEMPTS`),
            retryDelayMs: (attempt) => backoffDelay(attempt, retry),
            logger: logger.logger,
            onOutcome: (outcome, message) => {
              messages.inc({ outcome });
              handler.onOutcome?.(outcome, message);
            },
            retentionSeconds: get<number>('INBOX_RETENTION_SECONDS'),
            sweepIntervalSeconds: get<number>('INBOX_SWEEP_INTERVAL_SECONDS'),
            sessionTimeoutMs: get<number>('KAFKA_SESSION_TIMEOUT_MS'),
            partitionsConcurrently: get<number>('KAFKA_PARTITIONS_CONCURRENTLY'),
            onLag: (topic, partition, behind) => lag.set({ topic, partition: String(partition) }, behind),
            afterDatabaseCommit: get<boolean | undefined>('CRASH_AFTER_DATABASE_COMMIT')
              ? () => process.kill(process.pid, 'SIGKILL')
              : undefined,
          }),
        );
      },
    },
  ];
}
