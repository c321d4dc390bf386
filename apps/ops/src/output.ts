/** Prints `value` as one JSON line (for --json) or as the human text `text()` builds. */
export function print(json: boolean | undefined, value: unknown, text: () => string): void {
  process.stdout.write(`${json ? JSON.stringify(value) : text()}\n`);
}

/** A duration for people: `42s`, `3m 5s`, `2h 4m`, `3d 2h`. */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const [d, h, m] = [Math.floor(s / 86_400), Math.floor((s % 86_400) / 3_600), Math.floor((s % 3_600) / 60)];
  if (d) return `${d}d${h ? ` ${h}h` : ''}`;
  if (h) return `${h}h${m ? ` ${m}m` : ''}`;
  if (m) return `${m}m${s % 60 ? ` ${s % 60}s` : ''}`;
  return `${s}s`;
}
