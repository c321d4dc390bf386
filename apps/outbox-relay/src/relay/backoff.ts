/** Exponential backoff with full jitter and a cap, reset by the first success. */
export class Backoff {
  private failures = 0;

  constructor(
    private readonly minMs: number,
    private readonly maxMs: number,
    private readonly random: () => number = Math.random,
  ) {}

  next(): number {
    const ceiling = Math.min(this.maxMs, this.minMs * 2 ** Math.min(this.failures, 30));
    this.failures++;
    return Math.round(this.minMs + this.random() * (ceiling - this.minMs));
  }

  reset(): void {
    this.failures = 0;
  }
}
