import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Any change to api_clients (a revocation, a changed permission, a deleted client) NOTIFYs
 * `api_clients_changed` when it commits: the command API caches clients and drops its cache on it,
 * so a revoked key stops working at once (apps/command-api/src/auth/api-client-cache.ts).
 */
export class NotifyApiClientChanges1764720000040 implements MigrationInterface {
  name = 'NotifyApiClientChanges1764720000040';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `
      CREATE FUNCTION notify_api_clients_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('api_clients_changed', '');
        RETURN NULL;
      END $$`);
    await db.query(/* sql */ `
      CREATE TRIGGER api_clients_changed AFTER UPDATE OR DELETE OR TRUNCATE ON api_clients
      FOR EACH STATEMENT EXECUTE FUNCTION notify_api_clients_changed()`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP TRIGGER api_clients_changed ON api_clients`);
    await db.query(/* sql */ `DROP FUNCTION notify_api_clients_changed()`);
  }
}
