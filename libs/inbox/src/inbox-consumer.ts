import { createHash } from 'node:crypto';
import { Consumer, EachBatchPayload, Kafka, Producer } from 'kafkajs';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { DeadLetterHeaders } from '@app/contracts';
import { isDatabaseUnavailable, orderedProducer, queryRows } from '@app/platform';
import { declareRetention, InboxHandler, InboxOutcome, processOnce, remember, sweepInbox } from './inbox';
import { InboxMessage, MalformedMessage, toInboxMessage } from './inbox-message';

export interface InboxConsumerOptions {
  /** The consumer's name: its inbox key and its Kafka group id. */
  name: string;
  kafka: Kafka;
  topics: string[];
  dataSource: DataSource;
  handler: InboxHandler;
  deadLetterTopic: string;
  /** Attempts before a failing message is dead-lettered. Database outages are not counted. */
  maxAttempts: number;
  retryDelayMs: (attempt: number) => number;
  logger: Logger;
  /** Called once per message with what became of it (for metrics). */
  onOutcome?: (outcome: InboxOutcome | 'dead-lettered', message: InboxMessage) => void;
  onLag?: (topic: string, partition: number, lag: number) => void;
  /**
   * Messages that get a transaction of their own: those whose handler calls the outside world (a
   * webhook), since a rolled-back batch must not have called out for messages that then run again.
   * The others (types this consumer skips) still go through in batches, so catching up is fast.
   */
  oneAtATime?: (message: InboxMessage) => boolean;
  /** How long this consumer remembers message-ids: published for the ops replay, enforced by the sweep. */
  retentionSeconds: number;
  /** How often older inbox rows are deleted; 0 never. */
  sweepIntervalSeconds: number;
  /** How long the group waits for a silent member (a killed process) before giving its partitions away. */
  sessionTimeoutMs?: number;
  /** Test-only: runs after a database commit and before its offset commit (the crash window). */
  afterDatabaseCommit?: () => void;
}

/**
 * A fetched batch can hold thousands of messages (a consumer catching up). Each transaction takes
 * at most this many, and the consumer heartbeats after each commit, so a long catch-up never
 * outlasts the group's session timeout and gets the member thrown out mid-batch.
 */
const MAX_MESSAGES_PER_TRANSACTION = 200;

/**
 * A kafkajs consumer (eachBatch, no auto-commit) that hands each batch to `processOnce` and commits
 * the Kafka offsets only after the database commit. A crash in between redelivers the batch, and
 * the inbox turns the redelivery into duplicates. A message that keeps failing is retried
 * `maxAttempts` times (alone, so it cannot hold good messages hostage), then sent to the dead-letter
 * topic with its error and original coordinates, recorded, and the partition moves on.
 */
export class InboxConsumer {
  private consumer?: Consumer;
  private producer?: Producer;
  private starting?: Promise<void>;
  private sweepTimer?: NodeJS.Timeout;
  private stopped = false;
  private wake?: () => void;

  constructor(private readonly options: InboxConsumerOptions) {}

  /**
   * Publishes the retention, starts consuming — retrying while the broker is down or the topic does
   * not exist yet (the relay creates it) — and sweeps the inbox every `sweepIntervalSeconds`.
   */
  async run(): Promise<void> {
    const { dataSource, name, retentionSeconds, sweepIntervalSeconds } = this.options;
    await declareRetention(dataSource.manager, name, retentionSeconds);
    this.starting = this.startWhenKafkaAnswers();
    if (sweepIntervalSeconds > 0) this.sweepTimer = setInterval(() => void this.sweep(), sweepIntervalSeconds * 1000).unref();
  }

  /** Stops fetching, lets the batch in flight finish its transaction, then leaves the group. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.sweepTimer);
    this.wake?.();
    await this.starting;
    await this.disconnect();
  }

  private async startWhenKafkaAnswers(): Promise<void> {
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        await this.connect();
        this.options.logger.info({ consumer: this.options.name, topics: this.options.topics }, 'consuming');
        return;
      } catch (error) {
        const delay = Math.min(10_000, 250 * 2 ** Math.min(attempt, 6));
        this.options.logger.warn({ err: error, retryInMs: delay }, 'cannot start consuming yet; retrying');
        await this.disconnect().catch(() => undefined);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delay);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    }
  }

  private async sweep(): Promise<void> {
    const { dataSource, name, retentionSeconds, logger } = this.options;
    try {
      const deleted = await sweepInbox(dataSource.manager, { consumer: name, retentionSeconds });
      if (deleted) logger.info({ deleted }, 'forgot message-ids past the inbox retention');
    } catch (error) {
      logger.warn({ err: error }, 'inbox sweep failed; the next run retries');
    }
  }

  private async connect(): Promise<void> {
    const { kafka, name, topics } = this.options;
    this.producer = orderedProducer(kafka);
    await this.producer.connect();
    this.consumer = kafka.consumer({
      groupId: name,
      allowAutoTopicCreation: false,
      sessionTimeout: this.options.sessionTimeoutMs ?? 30_000,
      // An idle fetch waits this long for data; stop() waits for the fetch in flight, so this
      // bounds how long a shutdown takes (kafkajs' default of 5 s made SIGTERM feel stuck).
      maxWaitTimeInMs: 1_000,
    });
    await this.consumer.connect();
    for (const topic of topics) await this.consumer.subscribe({ topic, fromBeginning: true });
    await this.consumer.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: (payload) => this.onBatch(payload) });
  }

  private async disconnect(): Promise<void> {
    await this.consumer?.disconnect();
    await this.producer?.disconnect();
  }

  private async onBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    const messages = batch.messages.map((message) => toInboxMessage(batch.topic, batch.partition, message));
    let next = 0;
    while (next < messages.length && isRunning() && !isStale()) {
      const rest = messages.slice(next);
      const alone = rest.findIndex((message) => !message.messageId || this.options.oneAtATime?.(message));
      const chunk = rest.slice(0, Math.min(alone < 0 ? rest.length : alone, MAX_MESSAGES_PER_TRANSACTION));
      let done = 0;
      if (chunk.length > 1) {
        try {
          const outcomes = await processOnce(this.options.dataSource, this.options.name, chunk, this.options.handler);
          outcomes.forEach((outcome, i) => this.settled(outcome, chunk[i]));
          done = chunk.length;
        } catch (error) {
          if (isDatabaseUnavailable(error)) throw error; // kafkajs retries the batch; no offset moves
          // Something in the chunk fails: go on one message at a time to find it.
        }
      }
      if (!done) {
        if (!(await this.processAlone(rest[0], heartbeat, () => isRunning() && !isStale()))) return;
        done = 1;
      }
      next += done;
      this.options.afterDatabaseCommit?.();
      const last = messages[next - 1].offset;
      await this.consumer!.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() }]);
      resolveOffset(last);
      await heartbeat();
    }
    this.options.onLag?.(batch.topic, batch.partition, Number(batch.offsetLag()));
  }

  /**
   * One message with bounded attempts. False when the consumer is stopping or the partition was
   * reassigned during the retries (nothing committed; its new owner takes the message from there).
   */
  private async processAlone(message: InboxMessage, heartbeat: () => Promise<void>, stillOurs: () => boolean): Promise<boolean> {
    const { dataSource, name, handler, maxAttempts, retryDelayMs, logger } = this.options;
    for (let attempt = 1; ; attempt++) {
      if (!stillOurs()) return false;
      if (!message.messageId) {
        await this.deadLetter(message, 'missing or malformed message-id header', attempt);
        return true;
      }
      try {
        const [outcome] = await processOnce(dataSource, name, [message], handler);
        this.settled(outcome, message);
        return true;
      } catch (error) {
        const reason = (error as Error).message;
        if (isDatabaseUnavailable(error)) {
          attempt--; // the database is down, not the message: wait, do not count
        } else if (error instanceof MalformedMessage || attempt >= maxAttempts) {
          await this.deadLetter(message, reason, attempt);
          return true;
        }
        logger.warn({ ...logFields(name, message), attempt, err: error }, 'message failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, retryDelayMs(Math.max(attempt, 1))));
        await heartbeat();
      }
    }
  }

  private async deadLetter(message: InboxMessage, error: string, attempts: number): Promise<void> {
    const { dataSource, name, deadLetterTopic, logger } = this.options;
    const messageId = message.messageId ?? coordinatesId(message);
    await this.producer!.send({
      topic: deadLetterTopic,
      acks: -1,
      messages: [
        {
          key: message.key,
          value: message.value,
          headers: {
            ...message.headers,
            [DeadLetterHeaders.error]: error.slice(0, 1000),
            [DeadLetterHeaders.consumer]: name,
            [DeadLetterHeaders.originalTopic]: message.topic,
            [DeadLetterHeaders.originalPartition]: String(message.partition),
            [DeadLetterHeaders.originalOffset]: message.offset,
            [DeadLetterHeaders.attempts]: String(attempts),
          },
        },
      ],
    });
    await dataSource.transaction(async (manager) => {
      await remember(manager, name, { ...message, messageId }, 'dead-lettered');
      await queryRows(
        manager,
        /* sql */ `
        INSERT INTO dead_letters (consumer, message_id, topic, kafka_partition, kafka_offset, message_key, event_type,
                                  headers, payload, error, attempts)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
        ON CONFLICT (consumer, message_id) DO UPDATE
        SET topic = EXCLUDED.topic, kafka_partition = EXCLUDED.kafka_partition, kafka_offset = EXCLUDED.kafka_offset,
            message_key = EXCLUDED.message_key, event_type = EXCLUDED.event_type, headers = EXCLUDED.headers,
            payload = EXCLUDED.payload, error = EXCLUDED.error, attempts = EXCLUDED.attempts,
            dead_lettered_at = now(), redriven_at = NULL
        -- A re-driven message that failed again is open again; a redelivered one (crash before the offset commit) stays as recorded.
        WHERE dead_letters.redriven_at IS NOT NULL`,
        [name, messageId, message.topic, message.partition, message.offset, message.key, message.eventType ?? null,
          JSON.stringify(message.headers), message.value, error, attempts],
      );
    });
    this.options.onOutcome?.('dead-lettered', message);
    logger.error(
      { ...logFields(name, message), messageId, outcome: 'dead-lettered', error, attempts },
      'message dead-lettered',
    );
  }

  /**
   * One line per message once its transaction committed. `applied` and `duplicate` at info (one line per
   * event, like the API's request log; a duplicate is a redelivery an operator may want to see),
   * `skipped` at debug: events not meant for this consumer can be most of a shared topic.
   */
  private settled(outcome: InboxOutcome, message: InboxMessage): void {
    this.options.onOutcome?.(outcome, message);
    const level = outcome === 'skipped' ? 'debug' : 'info';
    this.options.logger[level]({ ...logFields(this.options.name, message), outcome }, 'message processed');
  }
}

function logFields(consumer: string, message: InboxMessage) {
  const { messageId, eventType, topic, partition, offset } = message;
  return { consumer, messageId, eventType, topic, partition, offset };
}

/** A stable id for a message that carries none, from its coordinates, so it is recorded once. */
function coordinatesId(message: InboxMessage): string {
  const hex = createHash('sha256').update(`${message.topic}:${message.partition}:${message.offset}`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
