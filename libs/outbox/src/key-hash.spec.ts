import fc from 'fast-check';
import { keyHash, shardOf } from './key-hash';

describe('keyHash', () => {
  it('is FNV-1a 32-bit (published test vectors)', () => {
    expect(keyHash('')).toBe(0x811c9dc5);
    expect(keyHash('a')).toBe(0xe40c292c);
    expect(keyHash('foobar')).toBe(0xbf9cf968);
  });

  it('hashes the UTF-8 bytes, so the same key always maps to the same shard', () => {
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 1, max: 1024 }), (key, shards) => {
        const shard = shardOf(key, shards);
        return shard === shardOf(key, shards) && shard >= 0 && shard < shards && Number.isInteger(shard);
      }),
    );
  });

  it('spreads uuid keys evenly enough across shards', () => {
    const counts = new Array(16).fill(0);
    fc.assert(
      fc.property(fc.uuid(), (key) => void counts[shardOf(key, 16)]++),
      { numRuns: 16_000 },
    );
    expect(Math.min(...counts)).toBeGreaterThan(800);
    expect(Math.max(...counts)).toBeLessThan(1200);
  });
});
