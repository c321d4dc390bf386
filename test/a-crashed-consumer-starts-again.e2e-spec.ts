import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Headers } from '@app/contracts';
import { ConsumerOutcome } from '@app/inbox';
import { eventually } from './support/eventually';
import { inboxConsumersOfTheirOwn } from './support/inbox-consumers-of-their-own';
import { searchSettings, searchTimeout } from './support/search';

/**
 * kafkajs restarts a consumer after a retriable crash only. After any other — a TypeError in the
 * consumer's own code, such as its lag callback (metrics) — it leaves the group for good while the
 * process stays up: every partition it held stopped until someone restarted the process. libs/inbox
 * starts such a consumer again (with a backoff while crashes follow each other). Searched: how many
 * messages, and how many crashes in a row, on a consumer of the real broker and database; each message
 * must still be applied exactly once, and consuming go on after the crashes.
 */
describe('a consumer that crashes starts again', () => {
  const suite = inboxConsumersOfTheirOwn('crash');
  const { db } = suite;

  /** A consumer of a topic of its own, recording inbox rows only; its first `crashes` lag reports throw. */
  async function crashingConsumer(crashes: number) {
    const { topic, name } = await suite.topicAndName();
    const seen = { reported: new Map<string, ConsumerOutcome>(), lagReports: 0 };
    const consumer = suite.consumer(name, topic, {
      onOutcome: (outcome, message) => {
        if (!seen.reported.has(message.messageId!)) seen.reported.set(message.messageId!, outcome);
      },
      // A bug in the consumer's own code after a batch: a TypeError, which kafkajs does not retry.
      onLag: () => {
        if (++seen.lagReports <= crashes) (undefined as unknown as { set(): void }).set();
      },
    });
    return { name, topic, consumer, seen };
  }

  it(
    'every message is applied once and reported, however many crashes come first',
    async () => {
      // More messages than crashes: each is first handled in a batch of its own, so consuming goes on after the last crash.
      const plans = fc
        .integer({ min: 1, max: 3 })
        .chain((crashes) => fc.tuple(fc.integer({ min: crashes + 1, max: 8 }), fc.constant(crashes)));
      await fc.assert(
        fc.asyncProperty(plans, async ([count, crashes]) => {
          const { name, topic, consumer, seen } = await crashingConsumer(crashes);
          const ids = Array.from({ length: count }, () => randomUUID());
          try {
            await consumer.run();
            for (const [i, id] of ids.entries()) {
              // Each once the one before was reported: a batch each, so crashes land between messages.
              await suite.producer().send({
                topic,
                acks: -1,
                messages: [{ key: id, value: '{}', headers: { [Headers.messageId]: id, [Headers.eventType]: 'Test' } }],
              });
              await eventually(
                () => seen.reported.has(id),
                (reported) => reported,
                {
                  timeoutMs: 30_000,
                  what: `message ${i + 1} of ${count} reported (the first ${crashes} lag reports throwing, ${seen.lagReports} made)`,
                },
              );
            }
            const { rows } = await db.pool.query('SELECT message_id, outcome FROM inbox_messages WHERE consumer = $1', [name]);
            expect(rows.map((row: { message_id: string }) => row.message_id).sort()).toEqual([...ids].sort());
            expect(rows.every((row: { outcome: string }) => row.outcome === 'applied')).toBe(true);
            expect([...seen.reported.values()].every((outcome) => outcome === 'applied')).toBe(true);
            // The last batch's lag report comes after its messages' outcomes.
            await eventually(
              () => seen.lagReports,
              (reports) => reports > crashes,
              { what: `a batch ending well after the ${crashes} crashes` },
            );
          } finally {
            await consumer.stop();
            await suite.forget(name);
          }
        }),
        searchSettings({ fast: 3, long: 20 }),
      );
    },
    searchTimeout(180_000),
  );
});
