import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Headers } from '@app/contracts';
import { eventually } from './support/eventually';
import { inboxConsumersOfTheirOwn } from './support/inbox-consumers-of-their-own';
import { searchSettings, searchTimeout } from './support/search';

/**
 * A consumer stopping in the middle of a batch (a deploy's SIGTERM) leaves the rest of the batch for
 * whoever consumes next: only offsets of messages whose transaction committed are resolved, so kafkajs'
 * commit on the way out covers no message that was not applied. Had kafkajs resolved the whole batch
 * when the handler returned early (eachBatchAutoResolve), the stop would commit past the messages it
 * never reached and no consumer would see them again. Searched: how big the backlog, how slow each
 * transaction, when the stop comes; a second consumer of the same group then drains the partition,
 * and every message must be in the inbox.
 */
describe('a consumer stopped in the middle of a batch loses nothing', () => {
  const suite = inboxConsumersOfTheirOwn('mid-batch');
  const { db } = suite;

  /** A consumer of `topic` in group `name` recording inbox rows only, each transaction taking `delayMs` more. */
  function consumerOf(name: string, topic: string, delayMs: number, applied: Set<string>) {
    return suite.consumer(name, topic, {
      handler: async (_db, messages) => {
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        return messages.map(() => 'applied' as const);
      },
      onOutcome: (_outcome, message) => applied.add(message.messageId!),
    });
  }

  it(
    'a stop at any moment of a batch: the next consumer of the group applies every message the first did not',
    async () => {
      // Several transactions of at most 1,000 messages for one fetched batch. The stop comes once `stopAfter`
      // of them committed, `into` the next one (which takes at least delayMs and is a full one), after
      // which one more is left at least.
      const plans = fc
        .record({
          stopAfter: fc.integer({ min: 1, max: 2 }),
          extra: fc.integer({ min: 1, max: 1_000 }),
          delayMs: fc.integer({ min: 50, max: 300 }),
          into: fc.double({ min: 0, max: 0.5, noNaN: true }),
        })
        .map(({ stopAfter, extra, ...plan }) => ({ ...plan, stopAfter, count: (stopAfter + 1) * 1_000 + extra }));
      let stoppedEarly = 0;
      await fc.assert(
        fc.asyncProperty(plans, async ({ count, delayMs, stopAfter, into }) => {
          const { topic, name } = await suite.topicAndName();
          const ids = Array.from({ length: count }, () => randomUUID());
          for (let i = 0; i < count; i += 500) {
            await suite.producer().send({
              topic,
              acks: -1,
              messages: ids
                .slice(i, i + 500)
                .map((id) => ({ key: id, value: '{}', headers: { [Headers.messageId]: id, [Headers.eventType]: 'Test' } })),
            });
          }
          const firstApplied = new Set<string>();
          const first = consumerOf(name, topic, delayMs, firstApplied);
          const secondApplied = new Set<string>();
          const second = consumerOf(name, topic, delayMs, secondApplied);
          try {
            await first.run();
            await eventually(
              () => firstApplied.size,
              (n) => n >= stopAfter * 1_000,
              { timeoutMs: 30_000, intervalMs: 5, what: `the first consumer applying ${stopAfter} transaction(s)` },
            );
            await new Promise((resolve) => setTimeout(resolve, into * delayMs));
            await first.stop();
            const stoppedAt = firstApplied.size;
            if (stoppedAt < count) stoppedEarly++;
            await second.run();
            const inInbox = async () =>
              (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM inbox_messages WHERE consumer = $1', [name])).rows[0].n;
            await eventually(inInbox, (n) => n === count, {
              timeoutMs: 60_000,
              what: `all ${count} messages in the inbox (the first consumer applied ${stoppedAt} before it stopped)`,
            });
            expect(new Set([...firstApplied, ...secondApplied])).toEqual(new Set(ids));
          } finally {
            await first.stop();
            await second.stop();
            await suite.forget(name);
          }
        }),
        searchSettings({ fast: 4, long: 30 }),
      );
      // What the search is about: stops with messages left (a slow machine may let a few come late).
      expect(stoppedEarly).toBeGreaterThan(0);
    },
    searchTimeout(240_000),
  );
});
