import { Kafka } from 'kafkajs';

/**
 * Creates those of `topics` the cluster does not have, with `partitions` partitions each, and waits
 * for their leaders; returns the ones it created. Safe when another process (a relay, a replay)
 * creates the same topic at the same moment: "already exists" is what both wanted.
 */
export async function ensureTopics(kafka: Kafka, topics: readonly string[], partitions: number): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = topics.filter((topic) => !existing.has(topic));
    if (!missing.length) return [];
    await admin
      .createTopics({ topics: missing.map((topic) => ({ topic, numPartitions: partitions })), waitForLeaders: true })
      .catch((error: unknown) => {
        if (!/already exists/i.test(String((error as Error)?.message))) throw error;
      });
    return missing;
  } finally {
    await admin.disconnect();
  }
}
