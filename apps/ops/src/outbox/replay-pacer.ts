/**
 * Spaces batches so that on average at most `rate` messages per second leave (each batch is at most
 * one second's worth, see `batchSize`). `interrupt()` ends a wait at once, for a graceful stop.
 */
export class Pacer {
  private nextAt = 0;
  private wake?: () => void;

  constructor(
    private readonly rate: number | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  /** Waits until a batch of `count` messages may start, then books the time it takes at `rate`. */
  async before(count: number): Promise<void> {
    if (this.rate === undefined) return;
    const delay = this.nextAt - this.now();
    if (delay > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
    this.nextAt = this.now() + (count / this.rate) * 1000;
  }

  interrupt(): void {
    this.wake?.();
  }
}
