import { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { Backoff, backoffDelay, keepLateConnectionErrorsFromCrashing, LoopWaits } from '@app/platform';
import { DeadLetterPublisher } from './dead-letter-publisher';
import { DeadLettering, logFields, PartitionTurn, pause } from './dead-lettering';
import { failureKind } from './failure-kind';
import { declareRetention, InboxHandler, InboxOutcome, processOnce, sweepInbox } from './inbox';
import { InboxMessage, toInboxMessage } from './inbox-message';

/**
 * What became of a message: handled (`InboxOutcome`), `dead-lettered`, or `dead-letter-refused` — given
 * up on, and the dead-letter topic refused it for its own sake, so it is recorded in `dead_letters` only.
 */
export type ConsumerOutcome = InboxOutcome | 'dead-lettered' | 'dead-letter-refused';

export interface InboxConsumerOptions {
  /** The consumer's name: its inbox key and its Kafka group id. */
  name: string;
  kafka: Kafka;
  topics: string[];
  dataSource: DataSource;
  handler: InboxHandler;
  deadLetterTopic: string;
  /**
   * Attempts before a failing message is dead-lettered. Only an unreachable database is not counted
   * (`isDatabaseUnreachable`); a statement timeout or a deadlock is an attempt like any other failure.
   */
  maxAttempts: number;
  /** Backoff before retry `n` (1, 2, …); also paces the waits while the database or Kafka is unreachable. */
  retryDelayMs: (attempt: number) => number;
  logger: Logger;
  /** Called once per message with what became of it (for metrics). */
  onOutcome?: (outcome: ConsumerOutcome, message: InboxMessage) => void;
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
  /**
   * How many partitions are applied at once (default 1), each in its own transaction on its own
   * connection: order is per partition, so partitions need not wait for each other.
   */
  partitionsConcurrently?: number;
  /** Test-only: runs after a database commit and before its offset commit (the crash window). */
  afterDatabaseCommit?: () => void;
}

/**
 * A fetched batch can hold thousands of messages (a consumer catching up). Each transaction takes
 * at most this many, and the consumer heartbeats after each commit, so a long catch-up never
 * outlasts the group's session timeout and gets the member thrown out mid-batch. The handlers write
 * a chunk in a few set-based statements (tens of ms for 1,000 rows here); every chunk costs a commit
 * (an fsync) and a Kafka offset commit, so fewer, larger ones catch up faster.
 */
const MAX_MESSAGES_PER_TRANSACTION = 1_000;
/** Waits between attempts to join the group while Kafka does not answer. */
const START_BACKOFF = { minMs: 250, maxMs: 10_000 };

/**
 * A kafkajs consumer (eachBatch) that hands each batch to `processOnce` and resolves the Kafka offsets
 * only after the database commit (kafkajs commits resolved offsets only). A crash in between redelivers the batch, and
 * the inbox turns the redelivery into duplicates. A message that keeps failing is retried
 * `maxAttempts` times (alone, so it cannot hold good messages hostage), then sent to the dead-letter
 * topic with its error and original coordinates, recorded, and the partition moves on. Only an
 * unreachable database (or Kafka, for the dead letter) is waited out without counting.
 */
export class InboxConsumer {
  private consumer?: Consumer;
  private publisher?: DeadLetterPublisher;
  private deadLetters?: DeadLettering;
  private starting?: Promise<void>;
  private sweepTimer?: NodeJS.Timeout;
  private sweeping = false;
  private stopped = false;
  /** Counts crashes since the last batch that ran to its end: how long to wait before starting again. */
  private readonly crashes = new Backoff(START_BACKOFF);
  /** Waits before starting (again); `stop()` ends them, and every later one at once. */
  private readonly waits = new LoopWaits();

  constructor(private readonly options: InboxConsumerOptions) {}

  /**
   * Publishes the retention, starts consuming — retrying while the broker is down or the topic does
   * not exist yet (the relay creates it) — and sweeps the inbox every `sweepIntervalSeconds`.
   */
  async run(): Promise<void> {
    const { dataSource, name, retentionSeconds, sweepIntervalSeconds } = this.options;
    keepLateConnectionErrorsFromCrashing(dataSource);
    await declareRetention(dataSource.manager, name, retentionSeconds);
    this.starting = this.startWhenKafkaAnswers();
    if (sweepIntervalSeconds > 0) this.sweepTimer = setInterval(() => void this.sweep(), sweepIntervalSeconds * 1000).unref();
  }

  /** Stops fetching, lets the batch in flight finish its transaction, then leaves the group. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.sweepTimer);
    this.waits.stop();
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
        const delay = backoffDelay(attempt, START_BACKOFF);
        this.options.logger.warn({ err: error, retryInMs: delay }, 'cannot start consuming yet; retrying');
        await this.disconnect().catch(() => undefined);
        await this.waits.wait(delay, 'backoff');
      }
    }
  }

  /**
   * kafkajs restarts its consumer after a retriable crash only; after any other (a bug in a handler's
   * callback, a message nothing foresaw) it leaves the group and consumes nothing more while the process
   * stays up. This starts it again, with the project's backoff while crashes follow each other: the
   * batch comes again from the last committed offset, and the inbox makes what had committed a duplicate.
   */
  private startAgainAfterCrash(error: Error): void {
    if (this.stopped) return;
    const delay = this.crashes.next();
    this.options.logger.error({ consumer: this.options.name, err: error, retryInMs: delay }, 'consumer crashed; starting it again');
    this.starting = (async () => {
      await this.disconnect().catch(() => undefined);
      await this.waits.wait(delay, 'backoff');
      await this.startWhenKafkaAnswers();
    })();
  }

  /** One sweep at a time: a sweep runs until nothing past the retention is left, which may outlast its interval. */
  private async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    const { dataSource, name, retentionSeconds, logger } = this.options;
    try {
      const deleted = await sweepInbox(dataSource.manager, { consumer: name, retentionSeconds });
      if (deleted) logger.info({ deleted }, 'forgot message-ids past the inbox retention');
    } catch (error) {
      logger.warn({ err: error }, 'inbox sweep failed; the next run retries');
    } finally {
      this.sweeping = false;
    }
  }

  private async connect(): Promise<void> {
    const { kafka, name, topics, deadLetterTopic } = this.options;
    this.publisher = new DeadLetterPublisher(kafka, deadLetterTopic);
    this.deadLetters = new DeadLettering(this.options, this.publisher);
    await this.publisher.connect();
    this.consumer = kafka.consumer({
      groupId: name,
      allowAutoTopicCreation: false,
      sessionTimeout: this.options.sessionTimeoutMs ?? 30_000,
      // An idle fetch waits this long for data; stop() waits for the fetch in flight, so this
      // bounds how long a shutdown takes (kafkajs' default of 5 s made SIGTERM feel stuck).
      maxWaitTimeInMs: 1_000,
    });
    this.consumer.on(this.consumer.events.CRASH, ({ payload }) => {
      if (!payload.restart) this.startAgainAfterCrash(payload.error);
    });
    await this.consumer.connect();
    for (const topic of topics) await this.consumer.subscribe({ topic, fromBeginning: true });
    // Offsets are committed by kafkajs after each batch, from the ones onBatch resolved after its
    // database commits (never before). One commit per batch and partitions side by side: a partition's
    // events no longer wait behind another partition's transaction and offset commit (docs/consumers.md).
    await this.consumer.run({
      autoCommit: true,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.options.partitionsConcurrently ?? 1,
      eachBatch: (payload) => this.onBatch(payload),
    });
  }

  private async disconnect(): Promise<void> {
    await this.consumer?.disconnect();
    await this.publisher?.disconnect();
  }

  private async onBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    const messages = batch.messages.map((message) => toInboxMessage(batch.topic, batch.partition, message));
    const turn: PartitionTurn = { heartbeat, stillOurs: () => isRunning() && !isStale() };
    let next = 0;
    // After a chunk failed for one of its messages, its messages go one at a time up to its end: trying
    // the rest as a chunk again after each would redo up to MAX_MESSAGES_PER_TRANSACTION rows per message.
    let aloneUntil = 0;
    while (next < messages.length && turn.stillOurs()) {
      const rest = messages.slice(next);
      const alone = rest.findIndex((message) => !message.messageId || this.options.oneAtATime?.(message));
      const chunk = rest.slice(0, Math.min(alone < 0 ? rest.length : alone, MAX_MESSAGES_PER_TRANSACTION));
      let done = 0;
      if (chunk.length > 1 && next >= aloneUntil) {
        try {
          const outcomes = await processOnce(this.options.dataSource, this.options.name, chunk, this.options.handler);
          outcomes.forEach((outcome, i) => this.settled(outcome, chunk[i]));
          done = chunk.length;
        } catch (error) {
          // A message of the chunk fails, or the database is unreachable: one at a time finds the
          // culprit and counts its attempts, and waits out an outage without counting (after which
          // the chunk is worth trying whole again).
          if (failureKind(error) !== 'unreachable') aloneUntil = next + chunk.length;
          this.options.logger.debug(
            { consumer: this.options.name, messages: chunk.length, err: error },
            'batch failed; going one message at a time',
          );
        }
      }
      if (!done) {
        if (!(await this.processAlone(rest[0], turn))) return;
        done = 1;
      }
      next += done;
      this.options.afterDatabaseCommit?.();
      const last = messages[next - 1].offset;
      // Only what committed is resolved; kafkajs commits the resolved offsets when the batch returns (and
      // before a rebalance or a stop). A crash before that redelivers them, and the inbox makes them duplicates.
      resolveOffset(last);
      await heartbeat();
    }
    this.options.onLag?.(batch.topic, batch.partition, Number(batch.offsetLag()));
    this.crashes.reset();
  }

  /**
   * One message with bounded attempts. An unreachable database is waited out, with a backoff that grows
   * while it lasts, and not counted; every other failure is. False when the consumer is stopping or the
   * partition was reassigned meanwhile (nothing committed; its new owner takes the message from there).
   */
  private async processAlone(message: InboxMessage, turn: PartitionTurn): Promise<boolean> {
    const { dataSource, name, handler, maxAttempts, retryDelayMs, logger } = this.options;
    if (!message.messageId) return this.deadLetters!.deadLetter(message, 'missing or malformed message-id header', 1, turn);
    for (let attempt = 1, waits = 0; turn.stillOurs();) {
      try {
        const [outcome] = await processOnce(dataSource, name, [message], handler);
        this.settled(outcome, message);
        return true;
      } catch (error) {
        const kind = failureKind(error);
        if (kind === 'malformed' || (kind === 'counted' && attempt >= maxAttempts)) {
          return this.deadLetters!.deadLetter(message, (error as Error)?.message ?? String(error), attempt, turn);
        }
        if (kind === 'unreachable') {
          logger.warn({ ...logFields(name, message), attempt, err: error }, 'database unreachable; waiting (not counted as an attempt)');
          await pause(retryDelayMs(++waits), turn);
        } else {
          logger.warn({ ...logFields(name, message), attempt, err: error }, 'message failed; retrying');
          await pause(retryDelayMs(attempt++), turn);
          waits = 0;
        }
      }
    }
    return false;
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
