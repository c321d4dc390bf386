import { Command, Option } from 'nest-commander';
import { carriesItsMessageId, DeadLetter, listDeadLetters } from '@app/inbox';
import { CliError, ExitCode } from '../cli-error';
import { integerOption, parseInstant } from '../options';
import { ConsumerDatabases } from '../consumer-databases';
import { OpsCommand } from '../ops-command';

interface ListOptions {
  consumer?: string;
  since?: Date;
  limit?: number;
  includeRedriven?: boolean;
  json?: boolean;
}

@Command({ name: 'dlq:list', description: 'List dead letters of every consumer, oldest first (re-driven ones only on request)' })
export class DlqListCommand extends OpsCommand<ListOptions> {
  protected readonly jsonShape =
    'an array of {consumer, messageId, hasMessageId, eventType, topic, partition, offset, attempts, error, deadLetteredAt, redrivenAt}';

  constructor(private readonly databases: ConsumerDatabases) {
    super();
  }

  async run(_: string[], options: ListOptions): Promise<void> {
    const limit = options.limit ?? 50;
    const selected = await this.databases.selectConsumers(options.consumer);
    const databases = options.consumer ? [...new Set(selected.map((registered) => registered.database))] : await this.databases.all();
    const letters: DeadLetter[] = [];
    for (const database of databases) {
      letters.push(...(await listDeadLetters(database.manager, { ...options, limit })));
    }
    const rows = letters
      .sort((a, b) => a.deadLetteredAt.getTime() - b.deadLetteredAt.getTime())
      .slice(0, limit)
      .map((letter) => ({
        consumer: letter.consumer,
        messageId: letter.messageId,
        hasMessageId: carriesItsMessageId(letter),
        eventType: letter.eventType,
        topic: letter.topic,
        partition: letter.partition,
        offset: letter.offset,
        attempts: letter.attempts,
        error: letter.error,
        deadLetteredAt: letter.deadLetteredAt.toISOString(),
        redrivenAt: letter.redrivenAt?.toISOString() ?? null,
      }));
    this.report(options, rows, () =>
      rows.length
        ? rows
            .map(
              (r) =>
                `${r.deadLetteredAt}  ${r.consumer}  ${r.messageId}${r.hasMessageId ? '' : ' (no message-id)'}  ${r.eventType ?? '-'}  ` +
                `${r.topic}[${r.partition}]@${r.offset}  attempts ${r.attempts}  ${r.redrivenAt ? `re-driven ${r.redrivenAt}  ` : ''}${r.error}`,
            )
            .join('\n')
        : 'no dead letters',
    );
  }

  @Option({ flags: '-c, --consumer <name>', description: 'only this consumer (as registered in inbox_consumers)' })
  parseConsumer(value: string): string {
    return value;
  }

  @Option({ flags: '--since <time>', description: 'only dead-lettered at or after this ISO 8601 time (2026-01-31T08:00:00Z)' })
  parseSince(value: string): Date {
    const since = parseInstant(value);
    if (!since) throw new CliError('--since must be an ISO 8601 time with its offset, e.g. 2026-01-31T08:00:00Z', ExitCode.usage);
    return since;
  }

  @Option({ flags: '-l, --limit <n>', description: 'at most this many (default 50, at most 1000)' })
  parseLimit(value: string): number {
    return integerOption('--limit', value, 1, 1_000);
  }

  @Option({ flags: '--include-redriven', description: 'also those already re-driven (redrivenAt set)' })
  parseIncludeRedriven(): boolean {
    return true;
  }
}
