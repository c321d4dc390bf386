/**
 * The waits of a polling loop that is also woken by news (a NOTIFY, a new row): a wait for `work`
 * ends early on news, a `backoff` after a failure ends only on `stop()` — new work never cuts a
 * backoff short (DESIGN: "Retries end"), or a loop whose every attempt fails would try once per event.
 * News that comes while the loop is not waiting for work is remembered: the next wait for work ends at
 * once.
 */
export class LoopWaits {
  private current?: { kind: 'work' | 'backoff'; done: () => void };
  private news = false;
  private stopped = false;

  /** New work: ends a wait for work now, or the next one at once; never a backoff. */
  notify(): void {
    this.news = true;
    if (this.current?.kind === 'work') this.current.done();
  }

  /** Whether news came since the last wait for work ended or `takeNews` took it; takes it. */
  takeNews(): boolean {
    const news = this.news;
    this.news = false;
    return news;
  }

  /** Ends whatever wait is under way, and every later one at once. */
  stop(): void {
    this.stopped = true;
    this.current?.done();
  }

  wait(ms: number, kind: 'work' | 'backoff'): Promise<void> {
    if (this.stopped || (kind === 'work' && this.takeNews())) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.current = undefined;
        if (kind === 'work') this.news = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.current = { kind, done };
    });
  }
}
