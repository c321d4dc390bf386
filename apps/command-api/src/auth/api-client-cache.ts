import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import { PinoLogger } from 'nestjs-pino';
import { DataSource } from 'typeorm';
import { ApiClient, hashApiKey } from '@app/api-clients';
import { Operation } from '@app/contracts';
import { backoffDelay, DedicatedSession, queryRows, retryOnLostSession } from '@app/platform';
import { CommandApiConfig } from '../config';

/** The NOTIFY channel of the api_clients trigger (libs/migrations, NotifyApiClientChanges). */
export const API_CLIENTS_CHANNEL = 'api_clients_changed';
const RECONNECT_BACKOFF = { minMs: 100, maxMs: 10_000 };

/** What a request knows of the client that sent it. */
export type AuthenticatedClient = Pick<ApiClient, 'id' | 'tenantId' | 'name' | 'allowedOperations'>;

/**
 * Active API clients by key hash, so that a request does not pay a database round trip to authenticate.
 *
 * Revocation still takes effect at once: every change to api_clients NOTIFYs on commit, and the cache
 * listens on a connection of its own and empties itself on each notification. It caches only while
 * that connection is listening (lost: emptied, bypassed, reconnected with backoff), and a lookup that
 * raced a notification is not cached (the generation moved), so a revoked key is never served from
 * the cache after its revocation was delivered. API_KEY_CACHE_SECONDS bounds the age of an entry on
 * top of that; 0 turns the cache off. Unknown keys are never cached: every one is looked up.
 */
@Injectable()
export class ApiClientCache implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly entries = new Map<string, { client: AuthenticatedClient; until: number }>();
  private readonly ttlMs: number;
  private session?: DedicatedSession;
  private listening = false;
  private generation = 0;
  private stopped = false;
  private reconnectTimer?: NodeJS.Timeout;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly logger: PinoLogger,
    config: ConfigService<CommandApiConfig, true>,
  ) {
    logger.setContext(ApiClientCache.name);
    this.ttlMs = config.get('API_KEY_CACHE_SECONDS', { infer: true }) * 1000;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (this.ttlMs > 0) await this.listen(1);
  }

  /**
   * Nest closes the HTTP server only after this hook, and a connection busy at that moment keeps being
   * served: from here on no revocation would be heard, so every request is looked up in the database.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.listening = false;
    this.forget();
    clearTimeout(this.reconnectTimer);
    await this.session?.close().catch(() => undefined);
  }

  /**
   * The active client holding `apiKey`, or null. Database errors propagate (a 503, never a 401).
   * `beforeLookup` runs (and may throw) only when the key must be looked up in the database.
   */
  async find(apiKey: string, beforeLookup?: () => Promise<void>): Promise<AuthenticatedClient | null> {
    const hash = hashApiKey(apiKey);
    const id = hash.toString('base64');
    const cached = this.entries.get(id);
    if (cached && this.listening && cached.until > Date.now()) return cached.client;
    await beforeLookup?.();
    const generation = this.generation;
    const client = await retryOnLostSession(() => lookUp(this.dataSource, hash));
    if (client && this.listening && this.ttlMs > 0 && generation === this.generation) {
      this.entries.set(id, { client, until: Date.now() + this.ttlMs });
    } else if (!client) {
      this.entries.delete(id);
    }
    return client;
  }

  private forget(): void {
    this.generation++;
    this.entries.clear();
  }

  private async listen(attempt: number): Promise<void> {
    let session: DedicatedSession | undefined;
    try {
      session = await DedicatedSession.open(this.dataSource, {
        onNotification: () => this.forget(),
        onLost: () => this.lost(session!),
      });
      // Shutdown began while it connected: nothing would close it, and the pool's end would wait for it.
      if (this.stopped) return await session.close();
      this.session = session;
      await session.manager.query(/* sql */ `LISTEN ${API_CLIENTS_CHANNEL}`);
      if (session.lost || this.stopped) return; // lost() or the shutdown closed it (and lost() scheduled the reconnect)
      this.forget(); // whatever changed while nobody listened
      this.listening = true;
    } catch (error) {
      if (session?.lost) return; // as above: one reconnect per loss
      // LISTEN failed on a live connection (a standby refuses it), or the connection died and its loss is
      // not reported yet: closed here, the session will not report it, and this is the one reconnect.
      if (session) this.drop(session);
      this.logger.warn({ err: error }, 'cannot listen for API client changes; authenticating from the database meanwhile');
      this.scheduleReconnect(attempt);
    }
  }

  private lost(session: DedicatedSession): void {
    if (this.session !== session) return;
    this.listening = false;
    this.forget();
    this.drop(session);
    this.logger.warn('lost the connection listening for API client changes; authenticating from the database until it is back');
    this.scheduleReconnect(1);
  }

  private drop(session: DedicatedSession): void {
    if (this.session === session) this.session = undefined;
    void session.close().catch(() => undefined);
  }

  private scheduleReconnect(attempt: number): void {
    if (this.stopped) return;
    const delay = backoffDelay(attempt, RECONNECT_BACKOFF);
    this.reconnectTimer = setTimeout(() => void this.listen(attempt + 1), delay);
    this.reconnectTimer.unref();
  }
}

/** One indexed lookup by the key's hash (the bare driver through TypeORM's connection, no entity mapping). */
async function lookUp(dataSource: DataSource, hash: Buffer): Promise<AuthenticatedClient | null> {
  const { rows } = await queryRows<{ id: string; tenant_id: string; name: string; allowed_operations: Operation[] }>(
    dataSource.manager,
    /* sql */ `SELECT id, tenant_id, name, allowed_operations FROM api_clients WHERE key_sha256 = $1 AND revoked_at IS NULL`,
    [hash],
  );
  const row = rows[0];
  return row ? { id: row.id, tenantId: row.tenant_id, name: row.name, allowedOperations: row.allowed_operations } : null;
}
