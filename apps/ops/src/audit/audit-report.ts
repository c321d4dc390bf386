/** One fact the audit could not confirm: what is wrong, and the ids an operator needs to look it up. */
export type Mismatch = { problem: string } & Record<string, string | number | null>;

/** A fact worth knowing that is not a mismatch (deliveries still pending), with its numbers. */
export type Note = { note: string } & Record<string, string | number | null>;

export interface CheckResult {
  name: string;
  checked: number;
  mismatches: number;
  /** The first `--limit` mismatches. */
  examples: Mismatch[];
  /** What a failure of this check usually means and what to do; only on a failed check. */
  hint?: string;
  /** Shown under the check's line whether it passed or not; only on checks that have something to say. */
  notes?: Note[];
}

export interface AuditReport {
  ok: boolean;
  checks: CheckResult[];
}

export interface AuditSettings {
  limit: number;
  graceSeconds: number;
  outboxRetentionSeconds: number;
}

/** The report as a person reads it: one line per check, then each failed check's examples and hint. */
export function renderReport(report: AuditReport, settings: AuditSettings): string {
  const failed = report.checks.filter((check) => check.mismatches > 0);
  const width = Math.max(...report.checks.map((check) => check.name.length));
  const lines = [
    `Audit (outbox retention ${settings.outboxRetentionSeconds} s, grace ${settings.graceSeconds} s): ` +
      (failed.length
        ? `${failed.length} of ${report.checks.length} checks found mismatches.`
        : `all ${report.checks.length} checks passed.`),
    '',
    ...report.checks.flatMap((check) => [
      `${check.mismatches ? 'FAIL' : 'ok  '}  ${check.name.padEnd(width)}  checked ${check.checked}, mismatches ${check.mismatches}`,
      ...(check.notes ?? []).map(({ note, ...fields }) => `      note: ${renderMismatch({ problem: note, ...fields })}`),
    ]),
  ];
  for (const check of failed) {
    lines.push(
      '',
      `${check.name}: ${check.mismatches} mismatch(es)${check.examples.length < check.mismatches ? `, the first ${check.examples.length}` : ''}`,
    );
    lines.push(...check.examples.map((example) => `  - ${renderMismatch(example)}`));
    if (check.hint) lines.push(`  ${check.hint}`);
  }
  return lines.join('\n');
}

export function renderMismatch({ problem, ...ids }: Mismatch): string {
  const fields = Object.entries(ids).filter(([, value]) => value !== null && value !== undefined);
  return `${problem}: ${fields.map(([name, value]) => `${name}=${value}`).join(' ')}`;
}
