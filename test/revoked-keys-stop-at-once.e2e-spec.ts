import fc from 'fast-check';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { searchSettings } from './support/search';

/**
 * The command API serves authenticated clients from memory (ApiClientCache); a revocation must still
 * take effect at once. The cache empties itself on the NOTIFY the api_clients trigger sends at commit,
 * and serves nothing from memory while its listening connection is lost. API_KEY_CACHE_SECONDS is set
 * to 10 minutes here, so only that machinery can explain a prompt 401. At a random moment while a
 * client keeps sending requests, its key is revoked (by SQL, or by the ops CLI's path, the same
 * UPDATE): every request sent more than a moment (250 ms, the NOTIFY's delivery) after the revocation
 * committed must be refused, and every one answered before the revocation was sent accepted.
 */
const SETTLE_MS = 250;

describe('a revoked API key stops working at once, although clients are cached', () => {
  // The stream of requests after each revocation is hundreds of failed authentications from one
  // address: the per-address budget (test/rate-limits-…) would answer them 429; here only revocation is measured.
  const suite = commandApiFixture({ API_KEY_CACHE_SECONDS: '600', RATE_LIMIT_UNAUTHENTICATED_REQUESTS: '0' });

  async function revokeUnderLoad(killListenerFirst: boolean, revokeAfterMs: number): Promise<void> {
    const { tenantId, apiKey, clientId } = await suite.db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const probe = () => client.get(`/v1/idempotency-receipts/orders.create/probe-${tenantId}`);
    expect((await probe()).status).toBe(404); // authenticated (and now cached): no such receipt
    const replies: { sentAt: number; answeredAt: number; status: number }[] = [];
    let revokedAt = Infinity;
    let stop = false;
    const load = (async () => {
      while (!stop) {
        const sentAt = Date.now();
        const { status } = await probe();
        replies.push({ sentAt, answeredAt: Date.now(), status });
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, revokeAfterMs));
    if (killListenerFirst) {
      const { rows } = await suite.db.pool.query(
        `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
         WHERE application_name = 'command-api' AND query = 'LISTEN api_clients_changed' AND datname = current_database()`,
      );
      expect(rows[0].n).toBe(1);
    }
    const revocationSent = Date.now();
    await suite.db.pool.query('UPDATE api_clients SET revoked_at = now() WHERE id = $1', [clientId]);
    revokedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS + 300));
    stop = true;
    await load;

    // Answered before the UPDATE was sent. (Not "sent before it": a request in flight while the UPDATE
    // commits may be looked up after it, and then 401 is the right answer.)
    const before = replies.filter((r) => r.answeredAt < revocationSent);
    const after = replies.filter((r) => r.sentAt >= revokedAt + SETTLE_MS);
    expect(after.length).toBeGreaterThan(0);
    expect(after.filter((r) => r.status !== 401)).toEqual([]);
    expect(before.filter((r) => r.status !== 404)).toEqual([]);
  }

  it('revoked while the cache listens: refused within moments, at any point of a stream of requests', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 400 }), async (revokeAfterMs) => revokeUnderLoad(false, revokeAfterMs)),
      searchSettings({ fast: 5, long: 30 }),
    );
  });

  it('revoked just after its listening connection was killed: refused too (nothing is served from memory until it listens again)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 400 }), async (revokeAfterMs) => {
        await revokeUnderLoad(true, revokeAfterMs);
        // It listens again (and caches again) within its reconnect backoff.
        await new Promise((resolve) => setTimeout(resolve, 1_500));
      }),
      searchSettings({ fast: 3, long: 15 }),
    );
  });
});
