import { randomBytes } from 'node:crypto';
import type { ICustomPartitioner, PartitionerArgs } from 'kafkajs';

const SEED = 0x9747b28c;
const M = 0x5bd1e995;

/**
 * Kafka's murmur2 (the Java client's `Utils.murmur2`) in 32-bit arithmetic. kafkajs computes the same
 * hash through a 64-bit `Long` object per step, which made it the largest single cost of publishing a
 * row after the encoding itself (about 7 µs of the relay's CPU per message); `Math.imul` gives Java's
 * wrapping int multiplication directly. `partitioner.spec.ts` checks it against kafkajs' own for
 * random keys and against values the Java client computed.
 */
export function murmur2(data: Buffer): number {
  const length = data.length;
  let h = SEED ^ length;
  const whole = length & ~3;
  for (let i = 0; i < whole; i += 4) {
    let k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M) ^ k;
  }
  const rest = length & 3; // the last one to three bytes
  if (rest) {
    if (rest === 3) h ^= data[whole + 2] << 16;
    if (rest >= 2) h ^= data[whole + 1] << 8;
    h ^= data[whole];
    h = Math.imul(h, M);
  }
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h;
}

/**
 * The partitioner every producer here uses: the partition kafkajs' `DefaultPartitioner` (and the Java
 * client's default) picks for every message — the message's own `partition` if it names one, else
 * murmur2 of the key modulo the topic's partition count, else round robin over the partitions that have
 * a leader — without its per-message costs (the `Long` hash, a filtered copy of the partition list).
 * So a key lands where any Java-compatible producer would put it, and per-key order holds whichever of
 * our publishers sent it.
 */
export const javaCompatiblePartitioner: ICustomPartitioner = () => {
  const counters = new Map<string, number>();
  return ({ topic, partitionMetadata, message }: PartitionerArgs): number => {
    if (message.partition !== null && message.partition !== undefined) return message.partition;
    const { key } = message;
    if (key !== null && key !== undefined) {
      const bytes = Buffer.isBuffer(key) ? key : Buffer.from(String(key));
      return (murmur2(bytes) & 0x7fffffff) % partitionMetadata.length;
    }
    // No key: round robin from a random start, as kafkajs does.
    const next = (counters.get(topic) ?? randomBytes(4).readUInt32BE(0)) + 1;
    counters.set(topic, next);
    const available = partitionMetadata.filter((partition) => partition.leader >= 0);
    if (available.length) return available[(next & 0x7fffffff) % available.length].partitionId;
    return (next & 0x7fffffff) % partitionMetadata.length;
  };
};
