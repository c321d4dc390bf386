import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { Message } from 'kafkajs';
import { DeadLetterHeaders, Headers } from '@app/contracts';
import { carriesItsMessageId, DeadLetter, forgetDeadLettered, listDeadLetters, lockDeadLetter, markRedriven } from '@app/inbox';
import { CliError } from '../cli-error';
import { ConsumerDatabase, ConsumerDatabases, RegisteredConsumer } from '../consumer-databases';
import { KafkaProducer } from '../kafka-producer';
import { duration } from '../output';

/** --all takes at most this many per run; run it again for the rest. */
export const ALL_LIMIT = 10_000;
const DEAD_LETTER_HEADERS = new Set<string>(Object.values(DeadLetterHeaders));

export interface RedriveRequest {
  /** Canonical message-ids; empty with `all`. */
  messageIds: string[];
  all?: boolean;
  consumer?: string;
}

export interface Selected {
  database: ConsumerDatabase;
  letter: DeadLetter;
  redrivenAt?: Date;
}

export interface RedrivePlan {
  selected: Selected[];
  skipped: { consumer: string; messageId: string; reason: string }[];
}

/**
 * dlq:redrive's work, apart from its flags and output: plan (find the dead letters, refuse what cannot
 * be re-driven safely) and re-drive them one at a time, each in one transaction of its consumer's
 * database around the publish. See docs/operator-cli.md.
 */
@Injectable()
export class DeadLetterRedriveService {
  constructor(
    private readonly databases: ConsumerDatabases,
    private readonly kafka: KafkaProducer,
  ) {}

  /** What would be re-driven, and what is refused and why. Named ids are all or nothing: a refusal throws. */
  async plan(request: RedriveRequest): Promise<RedrivePlan> {
    const found = await this.find(request);
    const registered = await this.databases.consumers();
    const skipped = found.flatMap(({ letter }) => {
      const reason = refusal(letter, registered);
      return reason ? [{ consumer: letter.consumer, messageId: letter.messageId, reason }] : [];
    });
    // Named ids are all or nothing: a typo or a refusal must not leave half of a list re-driven.
    if (request.messageIds.length && skipped.length) {
      throw new CliError(`refused, nothing re-driven: ${skipped.map((s) => `${s.messageId} (${s.consumer}): ${s.reason}`).join('; ')}`);
    }
    const selected = found.filter(({ letter }) => !skipped.some((s) => s.consumer === letter.consumer && s.messageId === letter.messageId));
    return { selected, skipped };
  }

  /** Re-drives the plan's dead letters under one new redrive-id; the reason it stopped early, if it did. */
  async redrive(plan: RedrivePlan, onEach?: () => void): Promise<{ redriveId: string; failure?: string }> {
    const redriveId = randomUUID();
    return { redriveId, failure: await this.redriveInTurn(plan.selected, redriveId, onEach) };
  }

  /** The dead letters named (every one must exist), or with --all every one not yet re-driven; oldest first. */
  private async find({ messageIds, all, consumer }: RedriveRequest): Promise<Selected[]> {
    const consumers = await this.databases.selectConsumers(consumer);
    const databases = consumer ? [...new Set(consumers.map((c) => c.database))] : await this.databases.all();
    const found: Selected[] = [];
    for (const database of databases) {
      const letters = await listDeadLetters(database.manager, {
        consumer,
        messageIds: all ? undefined : messageIds,
        includeRedriven: !all,
        limit: ALL_LIMIT,
      });
      found.push(...letters.map((letter) => ({ database, letter })));
    }
    const missing = messageIds.filter((id) => !found.some(({ letter }) => letter.messageId === id));
    if (missing.length) {
      throw new CliError(`no dead letter ${missing.join(', ')}${consumer ? ` of consumer ${consumer}` : ''} (see dlq:list)`);
    }
    return found.sort((a, b) => a.letter.deadLetteredAt.getTime() - b.letter.deadLetteredAt.getTime());
  }

  /** One after the other; stops at the first that fails and says so (those done stay done). */
  private async redriveInTurn(selected: Selected[], redriveId: string, onEach?: () => void): Promise<string | undefined> {
    for (const [i, item] of selected.entries()) {
      let stopped: string | undefined;
      try {
        item.redrivenAt = (await this.redriveOne(item, redriveId)) ?? undefined;
        if (!item.redrivenAt) stopped = 'was re-driven meanwhile by another run';
      } catch (error) {
        stopped = `failed, it stays re-drivable: ${(error as Error).message}`;
      }
      if (stopped) {
        const left = selected.length - i - 1;
        return `re-driving ${item.letter.messageId} (${item.letter.consumer}) ${stopped}${left ? `; ${left} more not attempted` : ''}`;
      }
      onEach?.();
    }
    return undefined;
  }

  /**
   * (a) forget the consumer's 'dead-lettered' inbox row, (b) publish the original message, (c) mark the
   * dead letter re-driven — in ONE transaction of the consumer's database that stays open across the
   * publish. Until it commits, a copy of the message reaching the consumer waits on the deleted inbox
   * row and, on a rollback, finds it again and is skipped: a failure anywhere leaves the dead letter
   * as it was, re-drivable, and nothing applied. See docs/operator-cli.md for every crash window.
   * Null when another run re-drove it first (it waited on the lock).
   */
  private redriveOne({ database, letter }: Selected, redriveId: string): Promise<Date | null> {
    return database.manager.transaction(async (manager) => {
      const current = await lockDeadLetter(manager, letter.consumer, letter.messageId);
      if (!current || current.redrivenAt) return null;
      await forgetDeadLettered(manager, current.consumer, current.messageId);
      await this.kafka.send(current.topic, asOriginal(current, redriveId));
      return markRedriven(manager, current.consumer, current.messageId);
    });
  }
}

/** Why this dead letter must not be re-driven, or undefined. */
function refusal(letter: DeadLetter, registered: RegisteredConsumer[]): string | undefined {
  if (letter.redrivenAt) return `already re-driven at ${letter.redrivenAt.toISOString()}`;
  if (!carriesItsMessageId(letter)) {
    return 'recorded without a usable message-id (under an id made from its Kafka coordinates): published again, no consumer could deduplicate it';
  }
  // Other consumers handled this message-id when it first came; each remembers that only for its retention.
  const occurredAt = Date.parse(letter.headers[Headers.occurredAt] ?? '');
  const since = Math.min(letter.deadLetteredAt.getTime(), Number.isNaN(occurredAt) ? Infinity : occurredAt);
  const ageSeconds = (Date.now() - since) / 1000;
  const forgetful = registered.filter((c) => c.consumer !== letter.consumer && c.retentionSeconds < ageSeconds);
  if (forgetful.length) {
    const names = forgetful.map((c) => `${c.consumer} (${duration(c.retentionSeconds)})`).join(', ');
    return `first seen ${duration(ageSeconds)} ago, beyond the inbox retention of ${names}: it may have forgotten the message-id and would apply it again`;
  }
  return undefined;
}

/** The message as it first came (key, value, original headers incl. message-id), plus `redrive-id`. */
function asOriginal(letter: DeadLetter, redriveId: string): Message {
  const headers = Object.fromEntries(Object.entries(letter.headers).filter(([name]) => !DEAD_LETTER_HEADERS.has(name)));
  return { key: letter.key, value: letter.payload, headers: { ...headers, [Headers.redriveId]: redriveId } };
}
