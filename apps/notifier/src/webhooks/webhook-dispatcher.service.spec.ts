import { ClaimedDelivery } from './delivery-store';
import { PostOutcome } from './post-webhook';
import { settlementOf } from './webhook-dispatcher.service';

const URL = 'http://receiver.test/hooks';
const delivery = (attempts: number): ClaimedDelivery => ({
  messageId: 'm-1',
  leaseId: 'l-1',
  orderId: 'o-1',
  eventType: 'OrderPlaced',
  payload: '{}',
  attempts,
});
const retry = (over: Partial<PostOutcome> = {}): PostOutcome => ({
  result: '5xx',
  verdict: 'retry',
  statusCode: 503,
  error: 'receiver answered 503',
  ...over,
});
/** The schedule's step exactly (no jitter: random() = 0.5). */
const settle = (attempts: number, outcome: PostOutcome, schedule = [1_000, 60_000]) =>
  settlementOf(delivery(attempts), URL, outcome, schedule, () => 0.5);

describe("a POST's settlement", () => {
  it('delivered, or dead at once with the reason when the receiver refused it as it is', () => {
    expect(settle(0, { result: '2xx', verdict: 'delivered', statusCode: 204 })).toEqual({
      messageId: 'm-1',
      leaseId: 'l-1',
      url: URL,
      statusCode: 204,
      state: 'delivered',
      retryInMs: null,
      error: null,
    });
    expect(settle(0, { result: '4xx', verdict: 'refused', statusCode: 410, error: 'receiver answered 410' })).toMatchObject({
      state: 'dead',
      error: 'receiver answered 410',
    });
  });

  it("pending again after the schedule's next step, and dead once the schedule is spent", () => {
    expect(settle(0, retry())).toMatchObject({ state: 'pending', retryInMs: 1_000, error: 'receiver answered 503' });
    expect(settle(1, retry())).toMatchObject({ state: 'pending', retryInMs: 60_000 });
    expect(settle(2, retry())).toMatchObject({
      state: 'dead',
      retryInMs: null,
      error: expect.stringMatching(/^retry schedule spent after 3 attempts/),
    });
  });

  it("honours a receiver's Retry-After when it asks for longer than the schedule, up to a day", () => {
    expect(settle(0, retry({ statusCode: 429, result: '4xx', retryAfterMs: 30_000 }))).toMatchObject({
      state: 'pending',
      retryInMs: 30_000,
    });
    expect(settle(0, retry({ retryAfterMs: 500 }))).toMatchObject({ retryInMs: 1_000 });
    expect(settle(0, retry({ retryAfterMs: 7 * 24 * 3600 * 1000 }))).toMatchObject({ retryInMs: 24 * 3600 * 1000 });
  });
});
