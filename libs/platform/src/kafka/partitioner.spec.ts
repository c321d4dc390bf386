import fc from 'fast-check';
import { Message, PartitionerArgs, PartitionMetadata, Partitioners } from 'kafkajs';
import { javaCompatiblePartitioner, murmur2 } from './partitioner';

/** `count` partitions, those in `leaderless` without a leader (as metadata shows them during an election). */
function partitions(count: number, leaderless: number[] = []): PartitionMetadata[] {
  return Array.from({ length: count }, (_, partitionId) => ({
    partitionId,
    leader: leaderless.includes(partitionId) ? -1 : 0,
    replicas: [0],
    isr: [0],
    offlineReplicas: [],
    partitionErrorCode: 0,
  }));
}

const key = fc.oneof(
  fc.uuid(),
  fc.string({ unit: 'binary', maxLength: 80 }), // any code point: UTF-8 of 1 to 4 bytes each
  fc.uint8Array({ maxLength: 80 }).map((bytes) => Buffer.from(bytes)),
);

describe('murmur2', () => {
  it("gives the Java client's hashes", () => {
    // Computed by Kafka's Java `Utils.murmur2`: Kafka's own UtilsTest, and kafkajs' Java-generated vectors.
    const java: [string, number][] = [
      ['21', -973932308],
      ['foobar', -790332482],
      ['a-little-bit-long-string', -985981536],
      ['a-little-bit-longer-string', -1486304829],
      ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
      ['abc', 479470107],
      ['0', 971027396],
      ['2187', -1508407203],
      ['10000000', -1830336757],
      ['100:48069', 1009543857],
    ];
    for (const [text, hash] of java) expect({ text, hash: murmur2(Buffer.from(text)) }).toEqual({ text, hash });
    expect((murmur2(Buffer.from('100:48069')) & 0x7fffffff) % 12).toBe(9); // the partition the Java producer chose
  });
});

describe('javaCompatiblePartitioner', () => {
  it("picks kafkajs' DefaultPartitioner's partition for every key and partition count", () => {
    const ours = javaCompatiblePartitioner();
    const kafkajs = Partitioners.DefaultPartitioner();
    fc.assert(
      fc.property(key, fc.integer({ min: 1, max: 200 }), (messageKey, count) => {
        const args: PartitionerArgs = { topic: 't', partitionMetadata: partitions(count), message: { key: messageKey, value: 'v' } };
        expect(ours(args)).toBe(kafkajs(args));
      }),
      { numRuns: 2_000 },
    );
  });

  it('takes a partition the message names, whatever its key', () => {
    const ours = javaCompatiblePartitioner();
    fc.assert(
      fc.property(fc.option(key), fc.integer({ min: 0, max: 5 }), (messageKey, partition) => {
        expect(ours({ topic: 't', partitionMetadata: partitions(6), message: { key: messageKey, value: 'v', partition } })).toBe(partition);
      }),
    );
  });

  it('goes round the partitions that have a leader for messages without a key, each topic on its own', () => {
    const ours = javaCompatiblePartitioner();
    const keyless: Message = { key: null, value: 'v' };
    const metadata = partitions(6, [2, 4]);
    const a = Array.from({ length: 8 }, () => ours({ topic: 'a', partitionMetadata: metadata, message: keyless }));
    const b = Array.from({ length: 4 }, () => ours({ topic: 'b', partitionMetadata: metadata, message: keyless }));
    const led = [0, 1, 3, 5];
    expect(new Set(a.slice(0, 4))).toEqual(new Set(led));
    expect(a.slice(4)).toEqual(a.slice(0, 4));
    expect(new Set(b)).toEqual(new Set(led));
    // With no partition led, it still names one of them.
    expect(ours({ topic: 'c', partitionMetadata: partitions(3, [0, 1, 2]), message: keyless })).toBeLessThan(3);
  });
});
