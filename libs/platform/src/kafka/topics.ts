import { Admin, Kafka } from 'kafkajs';

/** What a broker answers for a topic it is still creating (or whose deletion it is still finishing). */
const NOT_READY_YET = new Set(['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE']);

/**
 * Creates those of `topics` the cluster does not have, with `partitions` partitions each, and waits
 * until every partition has a leader; returns the ones it created. Safe when another process (a
 * relay, a replay) creates the same topic at the same moment: "already exists" is what both wanted.
 */
export async function ensureTopics(kafka: Kafka, topics: readonly string[], partitions: number, timeoutMs = 30_000): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = topics.filter((topic) => !existing.has(topic));
    if (!missing.length) return [];
    await admin
      .createTopics({ topics: missing.map((topic) => ({ topic, numPartitions: partitions })), waitForLeaders: false })
      .catch((error: unknown) => {
        if (!/already exists/i.test(String((error as Error)?.message))) throw error;
      });
    await waitForLeaders(admin, missing, timeoutMs);
    return missing;
  } finally {
    await admin.disconnect();
  }
}

/**
 * kafkajs' own wait for leaders retries only LEADER_NOT_AVAILABLE; right after a topic of the same name
 * was deleted (a broker that lost its data, an operator's recreate) the broker answers
 * UNKNOWN_TOPIC_OR_PARTITION for a moment, seen under load. Both mean "not yet" here.
 */
async function waitForLeaders(admin: Admin, topics: string[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const { topics: metadata } = await admin.fetchTopicMetadata({ topics });
      if (metadata.every(({ partitions }) => partitions.length > 0 && partitions.every((p) => p.leader >= 0))) return;
    } catch (error) {
      if (!NOT_READY_YET.has((error as { type?: string }).type ?? '') || Date.now() > deadline) throw error;
    }
    if (Date.now() > deadline) throw new Error(`topics ${topics.join(', ')} have no leader after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
