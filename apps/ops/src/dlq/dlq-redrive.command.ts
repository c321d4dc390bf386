import { randomUUID } from 'node:crypto';
import { Command, Help, Option } from 'nest-commander';
import { Message } from 'kafkajs';
import { canonicalUuid, DeadLetterHeaders, Headers } from '@app/contracts';
import { carriesItsMessageId, DeadLetter, forgetDeadLettered, listDeadLetters, lockDeadLetter, markRedriven } from '@app/inbox';
import { CliError, ExitCode } from '../cli-error';
import { ConsumerDatabase, ConsumerDatabases, RegisteredConsumer } from '../consumer-databases';
import { KafkaProducer } from '../kafka-producer';
import { duration } from '../output';
import { progress } from '../progress';
import { OpsCommand } from '../ops-command';

interface RedriveOptions {
  all?: boolean;
  consumer?: string;
  dryRun?: boolean;
  json?: boolean;
}

interface Selected {
  database: ConsumerDatabase;
  letter: DeadLetter;
  redrivenAt?: Date;
}

interface RedriveReport {
  redriveId: string | null;
  dryRun: boolean;
  selected: { consumer: string; messageId: string; eventType: string | null; topic: string; redrivenAt: string | null }[];
  skipped: { consumer: string; messageId: string; reason: string }[];
}

/** --all takes at most this many per run; run it again for the rest. */
const ALL_LIMIT = 10_000;
const DEAD_LETTER_HEADERS = new Set<string>(Object.values(DeadLetterHeaders));

@Command({
  name: 'dlq:redrive',
  arguments: '[messageIds...]',
  description: 'Publish dead letters again to their original topic, for their consumer to handle anew',
})
export class DlqRedriveCommand extends OpsCommand<RedriveOptions> {
  protected readonly jsonShape = '{redriveId, dryRun, selected: [...], skipped: [{consumer, messageId, reason}]}';

  constructor(
    private readonly databases: ConsumerDatabases,
    private readonly kafka: KafkaProducer,
  ) {
    super();
  }

  async run(args: string[], options: RedriveOptions): Promise<void> {
    const messageIds = [...new Set(args.map((id) => canonicalUuid(id) ?? id))];
    if (messageIds.length && options.all) throw new CliError('name message-ids or give --all, not both', ExitCode.usage);
    if (!messageIds.length && !options.all)
      throw new CliError('name the message-ids to re-drive (see dlq:list), or give --all', ExitCode.usage);
    const malformed = messageIds.filter((id) => !canonicalUuid(id));
    if (malformed.length) throw new CliError(`not a message-id (UUID): ${malformed.join(', ')}`, ExitCode.usage);

    const found = await this.find(messageIds, options);
    const registered = await this.databases.consumers();
    const skipped = found.flatMap(({ letter }) => {
      const reason = refusal(letter, registered);
      return reason ? [{ consumer: letter.consumer, messageId: letter.messageId, reason }] : [];
    });
    // Named ids are all or nothing: a typo or a refusal must not leave half of a list re-driven.
    if (messageIds.length && skipped.length) {
      throw new CliError(`refused, nothing re-driven: ${skipped.map((s) => `${s.messageId} (${s.consumer}): ${s.reason}`).join('; ')}`);
    }
    const selected = found.filter(({ letter }) => !skipped.some((s) => s.consumer === letter.consumer && s.messageId === letter.messageId));

    const redriveId = options.dryRun ? null : randomUUID();
    const failure = redriveId ? await this.redriveInTurn(selected, redriveId, options) : undefined;
    const report: RedriveReport = {
      redriveId,
      dryRun: options.dryRun ?? false,
      selected: selected.map(({ letter, redrivenAt }) => ({
        consumer: letter.consumer,
        messageId: letter.messageId,
        eventType: letter.eventType,
        topic: letter.topic,
        redrivenAt: redrivenAt?.toISOString() ?? null,
      })),
      skipped,
    };
    this.report(options, report, () => describe(report));
    if (failure) throw new CliError(failure);
  }

  /** The dead letters named (every one must exist), or with --all every one not yet re-driven; oldest first. */
  private async find(messageIds: string[], options: RedriveOptions): Promise<Selected[]> {
    const consumers = await this.databases.selectConsumers(options.consumer);
    const databases = options.consumer ? [...new Set(consumers.map((c) => c.database))] : await this.databases.all();
    const found: Selected[] = [];
    for (const database of databases) {
      const letters = await listDeadLetters(database.manager, {
        consumer: options.consumer,
        messageIds: options.all ? undefined : messageIds,
        includeRedriven: !options.all,
        limit: ALL_LIMIT,
      });
      found.push(...letters.map((letter) => ({ database, letter })));
    }
    const missing = messageIds.filter((id) => !found.some(({ letter }) => letter.messageId === id));
    if (missing.length) {
      throw new CliError(
        `no dead letter ${missing.join(', ')}${options.consumer ? ` of consumer ${options.consumer}` : ''} (see dlq:list)`,
      );
    }
    return found.sort((a, b) => a.letter.deadLetteredAt.getTime() - b.letter.deadLetteredAt.getTime());
  }

  /** One after the other; stops at the first that fails and says so (those done stay done). */
  private async redriveInTurn(selected: Selected[], redriveId: string, options: RedriveOptions): Promise<string | undefined> {
    const bar = progress('dlq:redrive', selected.length, options);
    try {
      for (const [i, item] of selected.entries()) {
        let stopped: string | undefined;
        try {
          item.redrivenAt = (await this.redrive(item, redriveId)) ?? undefined;
          if (!item.redrivenAt) stopped = 'was re-driven meanwhile by another run';
        } catch (error) {
          stopped = `failed, it stays re-drivable: ${(error as Error).message}`;
        }
        if (stopped) {
          const left = selected.length - i - 1;
          return `re-driving ${item.letter.messageId} (${item.letter.consumer}) ${stopped}${left ? `; ${left} more not attempted` : ''}`;
        }
        bar.increment();
      }
      return undefined;
    } finally {
      bar.stop();
    }
  }

  /**
   * (a) forget the consumer's 'dead-lettered' inbox row, (b) publish the original message, (c) mark the
   * dead letter re-driven — in ONE transaction of the consumer's database that stays open across the
   * publish. Until it commits, a copy of the message reaching the consumer waits on the deleted inbox
   * row and, on a rollback, finds it again and is skipped: a failure anywhere leaves the dead letter
   * as it was, re-drivable, and nothing applied. See docs/operator-cli.md for every crash window.
   * Null when another run re-drove it first (it waited on the lock).
   */
  private redrive({ database, letter }: Selected, redriveId: string): Promise<Date | null> {
    return database.manager.transaction(async (manager) => {
      const current = await lockDeadLetter(manager, letter.consumer, letter.messageId);
      if (!current || current.redrivenAt) return null;
      await forgetDeadLettered(manager, current.consumer, current.messageId);
      await this.kafka.send(current.topic, asOriginal(current, redriveId));
      return markRedriven(manager, current.consumer, current.messageId);
    });
  }

  @Option({ flags: '--all', description: `every dead letter not yet re-driven (at most ${ALL_LIMIT} per run)` })
  parseAll(): boolean {
    return true;
  }

  @Option({ flags: '-c, --consumer <name>', description: "only this consumer's dead letters" })
  parseConsumer(value: string): string {
    return value;
  }

  @Option({ flags: '--dry-run', description: 'show what would be re-driven; change nothing' })
  parseDryRun(): boolean {
    return true;
  }

  @Help('after')
  redriveNote(): string {
    return `
The message goes back to its original topic with its key, value and original headers (the same
message-id) plus redrive-id. Every consumer group on that topic receives it: the one that
dead-lettered it handles it anew, the others skip it as a duplicate by their inbox. Refused: a dead
letter already re-driven, one recorded without a usable message-id, and one older than another
consumer's inbox retention (that consumer may have forgotten it and would apply it again).
Exit codes: 0 done, 1 refused, not found or failed (a failed one stays re-drivable), 2 bad usage.
See docs/operator-cli.md.`;
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

function describe(report: RedriveReport): string {
  const line = (s: RedriveReport['selected'][number]) => `  ${s.consumer}  ${s.messageId}  -> ${s.topic}`;
  const done = report.selected.filter((s) => s.redrivenAt);
  const lines = report.dryRun
    ? [`Would re-drive ${report.selected.length} dead letter(s) (dry run: nothing changed):`, ...report.selected.map(line)]
    : [`Re-drove ${done.length} dead letter(s) (redrive-id ${report.redriveId}):`, ...done.map(line)];
  if (report.skipped.length)
    lines.push(`Skipped ${report.skipped.length}:`, ...report.skipped.map((s) => `  ${s.consumer}  ${s.messageId}: ${s.reason}`));
  return lines.join('\n');
}
