import { randomUUID } from 'node:crypto';
import { EntityManager, IsNull } from 'typeorm';
import { allOperations, Operation } from '@app/contracts';
import { ApiClient } from './api-client.entity';
import { generateApiKey } from './api-key';

export interface NewApiClient {
  tenantId: string;
  name?: string;
  operations?: Operation[];
}

/** Creates a client and returns its key, which exists nowhere else afterwards. Runs in `manager`'s transaction, if any. */
export async function createApiClient(manager: EntityManager, input: NewApiClient): Promise<{ client: ApiClient; apiKey: string }> {
  const { apiKey, sha256 } = generateApiKey();
  const id = randomUUID();
  const client = manager.create(ApiClient, {
    id,
    tenantId: input.tenantId,
    name: input.name ?? `client-${id.slice(0, 8)}`,
    allowedOperations: [...(input.operations ?? allOperations)],
    keySha256: sha256,
  });
  await manager.insert(ApiClient, client);
  return { client: await manager.findOneByOrFail(ApiClient, { id }), apiKey };
}

export function listApiClients(manager: EntityManager, tenantId?: string): Promise<ApiClient[]> {
  return manager.find(ApiClient, { where: tenantId ? { tenantId } : {}, order: { createdAt: 'ASC' } });
}

/** Revokes a client and returns it; null when there is no such client. Revoking twice keeps the first time. */
export async function revokeApiClient(manager: EntityManager, id: string): Promise<ApiClient | null> {
  await manager.update(ApiClient, { id, revokedAt: IsNull() }, { revokedAt: () => 'now()' });
  return manager.findOneBy(ApiClient, { id });
}
