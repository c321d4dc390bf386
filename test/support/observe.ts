import { RunningApp } from './apps';
import { http } from './http';
import { eventually } from './eventually';

/** One scrape of an app's /metrics, without credentials (Prometheus sends none). */
export async function scrape(app: RunningApp): Promise<{ status: number; contentType: string; text: string }> {
  const response = await http(`${app.managementUrl}/metrics`);
  return { status: response.status, contentType: String(response.headers['content-type']), text: response.text };
}

/** The value of one sample (`name{labels} value`); 0 when the series does not exist yet. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([label, value]) => `${label}="${value}"`);
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = match[2] ? match[2].split(/,(?=[a-zA-Z_]\w*=")/) : [];
    if (present.length === wanted.length && wanted.every((pair) => present.includes(pair))) return Number(match[3]);
  }
  return 0;
}

export type LogLine = Record<string, any>;

/** The app's JSON log lines so far (anything else it printed is left out). */
export function logLines(app: RunningApp): LogLine[] {
  return app
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as LogLine];
      } catch {
        return [];
      }
    });
}

/** Waits for a log line matching `predicate`: lines are written after the response or the commit, not before. */
export async function logLine(app: RunningApp, predicate: (line: LogLine) => boolean, timeoutMs = 10_000): Promise<LogLine> {
  const found = await eventually(
    () => logLines(app).find(predicate),
    (line) => line !== undefined,
    { timeoutMs, what: 'a matching log line' },
  ).catch(() => {
    throw new Error(`no such log line within ${timeoutMs} ms:\n${app.output().slice(-4000)}`);
  });
  return found!;
}
