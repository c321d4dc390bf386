import { createHash } from 'node:crypto';
import { recordDeadLetter } from './dead-letters';
import { DeadLetterPublisher } from './dead-letter-publisher';
import { failureKind } from './failure-kind';
import { InboxMessage } from './inbox-message';
import type { InboxConsumerOptions } from './inbox-consumer';

/** The consumer's hold on the partition of the batch in hand. */
export interface PartitionTurn {
  heartbeat: () => Promise<void>;
  /** False once the consumer is stopping or the partition was reassigned: commit nothing more. */
  stillOurs: () => boolean;
}

/** Waits `ms` in slices, heartbeating, so a long backoff never outlasts the group's session timeout; ends early when the turn is over. */
export async function pause(ms: number, turn: PartitionTurn): Promise<void> {
  const until = Date.now() + ms;
  while (turn.stillOurs()) {
    const left = until - Date.now();
    if (left <= 0) return;
    await new Promise((resolve) => setTimeout(resolve, Math.min(left, 1_000)));
    await turn.heartbeat();
  }
}

type Options = Pick<
  InboxConsumerOptions,
  'name' | 'dataSource' | 'deadLetterTopic' | 'maxAttempts' | 'retryDelayMs' | 'logger' | 'onOutcome'
>;

/**
 * Gives up on a message: the dead letter goes to the dead-letter topic, then into `dead_letters` and
 * the inbox. Kafka or the database being unreachable is waited out. When the topic refuses the dead
 * letter for its own sake (too large for it), the message is recorded with that refusal, logged and
 * counted as `dead-letter-refused`: the partition neither stalls on it nor loses it.
 */
export class DeadLettering {
  constructor(
    private readonly options: Options,
    private readonly publisher: DeadLetterPublisher,
  ) {}

  /** True once recorded; false when the turn ended first (nothing recorded: the partition's next owner gives up on it again). */
  async deadLetter(message: InboxMessage, error: string, attempts: number, turn: PartitionTurn): Promise<boolean> {
    const { name, deadLetterTopic, logger } = this.options;
    const refusal = await this.publish(message, error, attempts, turn);
    if (refusal === false) return false;
    const recorded = refusal ? `${error}; its dead letter was refused by ${deadLetterTopic}: ${refusal}` : error;
    if (!(await this.record(message, recorded, attempts, turn))) return false;
    const outcome = refusal ? 'dead-letter-refused' : 'dead-lettered';
    this.options.onOutcome?.(outcome, message);
    logger.error(
      { ...logFields(name, message), messageId: message.messageId ?? coordinatesId(message), outcome, error: recorded, attempts },
      refusal ? 'message dead-lettered; the dead-letter topic refused it, so it is in dead_letters only' : 'message dead-lettered',
    );
    return true;
  }

  /** Nothing once the topic has it, Kafka's refusal when it never will, false when the turn ended. */
  private async publish(message: InboxMessage, error: string, attempts: number, turn: PartitionTurn): Promise<string | undefined | false> {
    const { name, logger, retryDelayMs } = this.options;
    for (let waits = 1; turn.stillOurs(); waits++) {
      try {
        return await this.publisher.publish({ consumer: name, message, error, attempts });
      } catch (failure) {
        logger.warn({ ...logFields(name, message), err: failure }, 'dead letter not sent; retrying with a new producer');
        await pause(retryDelayMs(waits), turn);
      }
    }
    return false;
  }

  /**
   * Records the dead letter, waiting out an unreachable database. If recording keeps failing otherwise,
   * this throws after the bounded attempts: the batch fails, loudly (kafkajs retries it, then restarts the
   * consumer), rather than move past a message that is recorded nowhere.
   */
  private async record(message: InboxMessage, error: string, attempts: number, turn: PartitionTurn): Promise<boolean> {
    const { dataSource, name, maxAttempts, retryDelayMs, logger } = this.options;
    const messageId = message.messageId ?? coordinatesId(message);
    for (let attempt = 1, waits = 0; turn.stillOurs();) {
      try {
        await dataSource.transaction((manager) => recordDeadLetter(manager, name, { ...message, messageId }, error, attempts));
        return true;
      } catch (failure) {
        const unreachable = failureKind(failure) === 'unreachable';
        if (!unreachable && attempt >= maxAttempts) throw failure;
        logger.warn({ ...logFields(name, message), err: failure }, 'dead letter not recorded; retrying');
        await pause(retryDelayMs(unreachable ? ++waits : attempt++), turn);
      }
    }
    return false;
  }
}

export function logFields(consumer: string, message: InboxMessage) {
  const { messageId, eventType, topic, partition, offset } = message;
  return { consumer, messageId, eventType, topic, partition, offset };
}

/** A stable id for a message that carries none, from its coordinates, so it is recorded once. */
function coordinatesId(message: InboxMessage): string {
  const hex = createHash('sha256').update(`${message.topic}:${message.partition}:${message.offset}`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
