/**
 * FNV-1a (32 bit) of a message key. Stored on every outbox row so relays can split keys into shards
 * in SQL (`key_hash % shards`) while every row of one key lands in the same shard. Never change it
 * while rows are unpublished: a key would move shards mid-flight.
 */
export function keyHash(key: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(key, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

export function shardOf(key: string, shards: number): number {
  return keyHash(key) % shards;
}
