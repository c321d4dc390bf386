/** Prints `value` as one JSON line (for --json) or as the human text `text()` builds. */
export function print(json: boolean | undefined, value: unknown, text: () => string): void {
  process.stdout.write(`${json ? JSON.stringify(value) : text()}\n`);
}
