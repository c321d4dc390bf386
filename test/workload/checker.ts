import { actionId, Attempt, History } from './history';

/** One tenant's rows in the three databases, read after the pipeline drained. */
export interface Snapshot {
  orders: { id: string; status: string }[];
  receipts: { operation: string; key: string; responseStatus: number | null; effectId: string | null }[];
  outbox: { id: string; sequence: number; messageKey: string; eventType: string; published: boolean }[];
  shipments: { orderId: string; status: string; messageId: string }[];
  /** fulfillment's cancelled_orders: a cancel it applied before the order's OrderPlaced. */
  cancelledMarkers: { orderId: string }[];
  inbox: { consumer: string; messageId: string; outcome: string }[];
  /** The notifier's webhook_deliveries: one per order event, `delivered` once the pipeline drained. */
  webhookDeliveries: { messageId: string; orderId: string; state: string; lastError?: string | null }[];
  /** Every POST the webhook receiver got, in arrival order: its webhook-id, order and answer (a 2xx again for one id is a repeat the receiver dedupes). */
  webhookPosts: { messageId: string; orderId: string; type: string; status: number }[];
}

/** The tenant's messages on the order-events topic, read from the beginning. */
export interface KafkaMessage {
  partition: number;
  offset: number;
  key: string;
  messageId: string;
  eventType: string;
}

export interface Counts {
  /** Commands the driver sent (retries included), and every request (resends that resolved unknown outcomes too). */
  commandsSent: number;
  requests: number;
  /** Requests that got no answer at all (a reset or refused connection, a timeout): their outcome was unknown until resolved. */
  cutOff: number;
  /** Logical actions (operation, key) whose outcome the client learned, from a reply or a receipt. */
  acknowledged: number;
  /** ... of which learned only from `GET /v1/idempotency-receipts` after no reply. */
  resolvedByReceipt: number;
  /** Logical actions the client never learned the outcome of (zero or one effect allowed). */
  unknown: number;
  rejectedChangedFields: number;
  orders: number;
  cancellations: number;
  outboxRows: number;
  kafkaMessageIds: number;
  kafkaRedeliveries: number;
  fulfillmentApplied: number;
  notifierDelivered: number;
  webhookRepeats: number;
  lost: number;
  duplicated: number;
  outOfOrder: number;
  receiptsWithoutEffects: number;
  wrongAnswers: number;
  /** Every 5xx answer; `unavailable` counts the 503s with Retry-After among them. */
  serverErrors: number;
  unavailable: number;
}

export interface CheckResult {
  counts: Counts;
  /** One line per finding, naming the key, order or message-id: the evidence behind the counts. */
  problems: string[];
}

const PLACED = 'OrderPlaced';
const CANCELLED = 'OrderCancelled';

/** A reply that is the action's answer, not "try again": a 409 in progress and a 503 carry Retry-After. */
function definite(attempt: Attempt): boolean {
  if (attempt.status === undefined) return false;
  if ((attempt.status === 409 || attempt.status === 503) && attempt.retryAfter !== undefined) return false;
  return attempt.status < 500;
}

/**
 * Counts what a run lost, duplicated or reordered, from what the client saw (`history`), what the
 * databases hold (`snapshot`) and what Kafka carried (`kafka`). Pure: the unit spec feeds it made-up
 * histories; the fault suites feed it real ones.
 */
export function check(history: History, snapshot: Snapshot, kafka: KafkaMessage[]): CheckResult {
  const problems: string[] = [];
  const counts: Counts = {
    commandsSent: history.attempts.filter((a) => a.intent !== 'resolve').length,
    requests: history.attempts.length,
    cutOff: history.attempts.filter((a) => a.error !== undefined).length,
    acknowledged: 0,
    resolvedByReceipt: 0,
    unknown: 0,
    rejectedChangedFields: 0,
    orders: snapshot.orders.length,
    cancellations: snapshot.orders.filter((o) => o.status === 'cancelled').length,
    outboxRows: snapshot.outbox.length,
    kafkaMessageIds: 0,
    kafkaRedeliveries: 0,
    fulfillmentApplied: 0,
    notifierDelivered: snapshot.webhookDeliveries.filter((d) => d.state === 'delivered').length,
    webhookRepeats: 0,
    lost: 0,
    duplicated: 0,
    outOfOrder: 0,
    receiptsWithoutEffects: 0,
    wrongAnswers: 0,
    serverErrors: 0,
    unavailable: 0,
  };
  const problem = (kind: 'lost' | 'duplicated' | 'outOfOrder' | 'receiptsWithoutEffects' | 'wrongAnswers', text: string) => {
    counts[kind]++;
    problems.push(`${kind}: ${text}`);
  };

  for (const attempt of history.attempts) {
    if (attempt.status === undefined || attempt.status < 500) continue;
    counts.serverErrors++;
    if (attempt.status === 503 && attempt.retryAfter !== undefined) counts.unavailable++;
    else problems.push(`serverErrors: ${attempt.operation} ${attempt.key} answered ${attempt.status}`);
  }

  // The command side: every acknowledged action has its receipt and its one effect; nothing else has an effect.
  const orders = new Map(snapshot.orders.map((o) => [o.id, o]));
  const receipts = new Map(snapshot.receipts.map((r) => [actionId(r.operation as Attempt['operation'], r.key), r]));
  const byAction = new Map<string, Attempt[]>();
  for (const attempt of history.attempts) {
    const id = actionId(attempt.operation, attempt.key);
    byAction.set(id, [...(byAction.get(id) ?? []), attempt]);
  }
  const resolved = new Map(history.resolutions.filter((r) => r.lookupStatus === 200).map((r) => [actionId(r.operation, r.key), r]));

  for (const [id, attempts] of byAction) {
    for (const changed of attempts.filter((a) => a.intent === 'changed' && definite(a))) {
      if (changed.status === 422) counts.rejectedChangedFields++;
      else if (changed.status! < 300) problem('duplicated', `${id} with changed fields answered ${changed.status}, not 422`);
      else problem('wrongAnswers', `${id} with changed fields answered ${changed.status}, not 422`);
    }
    const answers = attempts.filter((a) => a.intent !== 'changed' && definite(a));
    const receipt = receipts.get(id);
    const resolution = resolved.get(id);
    if (answers.length === 0 && !resolution) {
      counts.unknown++;
      continue;
    }
    counts.acknowledged++;
    if (answers.length === 0) counts.resolvedByReceipt++;
    const outcomes = new Set(answers.map((a) => `${a.status} ${a.orderId ?? ''}`));
    if (resolution) outcomes.add(`${resolution.responseStatus} ${resolution.effectId ?? answers[0]?.orderId ?? ''}`);
    if (outcomes.size > 1) problem('duplicated', `${id} was answered differently: ${[...outcomes].join(' / ')}`);
    const status = answers[0]?.status ?? resolution!.responseStatus;
    const orderId = answers[0]?.orderId ?? resolution?.effectId;
    if (!receipt) {
      problem('lost', `${id} was acknowledged (${status}) but has no receipt`);
      continue;
    }
    if (receipt.responseStatus !== status)
      problem('wrongAnswers', `${id} answered ${status}, its receipt stores ${receipt.responseStatus}`);
    if ((status === 201 || status === 200) && orderId && !orders.has(orderId))
      problem('lost', `${id} acknowledged order ${orderId}, which does not exist`);
    if (id.startsWith('orders.cancel') && status === 200 && orders.get(orderId ?? '')?.status !== 'cancelled') {
      problem('lost', `${id} acknowledged the cancellation of ${orderId}, which is not cancelled`);
    }
  }

  const creators = new Map<string, number>();
  const cancellers = new Map<string, number>();
  for (const receipt of snapshot.receipts) {
    const ok = receipt.responseStatus === 201 || receipt.responseStatus === 200;
    if (!ok) continue;
    if (!receipt.effectId || !orders.has(receipt.effectId)) {
      problem(
        'receiptsWithoutEffects',
        `${receipt.operation} ${receipt.key} stores ${receipt.responseStatus} for ${receipt.effectId}, which does not exist`,
      );
      continue;
    }
    const tally = receipt.operation === 'orders.create' ? creators : cancellers;
    tally.set(receipt.effectId, (tally.get(receipt.effectId) ?? 0) + 1);
  }
  for (const order of snapshot.orders) {
    const created = creators.get(order.id) ?? 0;
    if (created !== 1) problem('duplicated', `order ${order.id} is the effect of ${created} create receipts`);
    const cancelled = cancellers.get(order.id) ?? 0;
    if (order.status === 'cancelled' && cancelled !== 1)
      problem('duplicated', `order ${order.id} is cancelled by ${cancelled} cancel receipts`);
    if (order.status !== 'cancelled' && cancelled !== 0) problem('lost', `order ${order.id} has a cancel receipt but is ${order.status}`);
  }

  // The outbox: one OrderPlaced per order, one OrderCancelled per cancelled order, each published.
  const events = new Map<string, { placed: string[]; cancelled: string[] }>();
  for (const row of [...snapshot.outbox].sort((a, b) => a.sequence - b.sequence)) {
    const of = events.get(row.messageKey) ?? { placed: [], cancelled: [] };
    if (row.eventType === PLACED) of.placed.push(row.id);
    else if (row.eventType === CANCELLED) of.cancelled.push(row.id);
    events.set(row.messageKey, of);
    if (!orders.has(row.messageKey)) problem('duplicated', `outbox row ${row.id} (${row.eventType}) names no order: ${row.messageKey}`);
    if (!row.published) problem('lost', `outbox row ${row.id} (${row.eventType}, ${row.messageKey}) was never published`);
  }
  for (const order of snapshot.orders) {
    const of = events.get(order.id) ?? { placed: [], cancelled: [] };
    const wantCancelled = order.status === 'cancelled' ? 1 : 0;
    if (of.placed.length < 1) problem('lost', `order ${order.id} has no OrderPlaced in the outbox`);
    if (of.placed.length > 1) problem('duplicated', `order ${order.id} has ${of.placed.length} OrderPlaced rows`);
    if (of.cancelled.length < wantCancelled) problem('lost', `cancelled order ${order.id} has no OrderCancelled in the outbox`);
    if (of.cancelled.length > wantCancelled)
      problem('duplicated', `order ${order.id} (${order.status}) has ${of.cancelled.length} OrderCancelled rows`);
  }

  // Kafka: every outbox row at least once; one key on one partition, its events in outbox order.
  const outboxIds = new Map(snapshot.outbox.map((row) => [row.id, row]));
  const firstOffset = new Map<string, KafkaMessage>();
  for (const message of [...kafka].sort((a, b) => a.partition - b.partition || a.offset - b.offset)) {
    if (!outboxIds.has(message.messageId)) problem('duplicated', `Kafka carries ${message.messageId}, which no outbox row has`);
    if (firstOffset.has(message.messageId)) counts.kafkaRedeliveries++;
    else firstOffset.set(message.messageId, message);
  }
  counts.kafkaMessageIds = firstOffset.size;
  for (const row of snapshot.outbox) {
    if (!firstOffset.has(row.id)) problem('lost', `outbox row ${row.id} (${row.eventType}, ${row.messageKey}) is not on Kafka`);
  }
  for (const [key, of] of events) {
    const sent = [...of.placed, ...of.cancelled].map((id) => firstOffset.get(id)).filter((m): m is KafkaMessage => !!m);
    if (new Set(sent.map((m) => m.partition)).size > 1)
      problem('outOfOrder', `the events of ${key} are on partitions ${sent.map((m) => m.partition).join(', ')}`);
    else if (sent.some((m, i) => i > 0 && m.offset < sent[i - 1].offset))
      problem('outOfOrder', `the events of ${key} are on Kafka out of outbox order`);
  }

  // Consumers: each event applied once by fulfillment (and seen by the notifier); the effect matches the order.
  const inbox = new Map(snapshot.inbox.map((row) => [`${row.consumer} ${row.messageId}`, row.outcome]));
  for (const row of snapshot.inbox) {
    if (!outboxIds.has(row.messageId)) problem('duplicated', `${row.consumer} handled ${row.messageId}, which no outbox row has`);
  }
  for (const row of snapshot.outbox) {
    const fulfillment = inbox.get(`fulfillment ${row.id}`);
    if (fulfillment === 'applied') counts.fulfillmentApplied++;
    else problem('lost', `fulfillment ${fulfillment ?? 'never handled'} ${row.eventType} ${row.id}`);
    const notifier = inbox.get(`notifier ${row.id}`);
    if (notifier !== 'applied') problem('lost', `notifier ${notifier ?? 'never handled'} ${row.eventType} ${row.id}`);
  }
  const shipments = new Map<string, Snapshot['shipments'][number]>();
  for (const shipment of snapshot.shipments) {
    if (shipments.has(shipment.orderId)) problem('duplicated', `order ${shipment.orderId} has two shipments`);
    shipments.set(shipment.orderId, shipment);
    const order = orders.get(shipment.orderId);
    if (!order) problem('duplicated', `shipment for ${shipment.orderId}, which is no order`);
    else if (!(events.get(order.id)?.placed ?? []).includes(shipment.messageId)) {
      problem('duplicated', `shipment of ${order.id} came from ${shipment.messageId}, not its OrderPlaced`);
    }
  }
  for (const order of snapshot.orders) {
    const shipment = shipments.get(order.id);
    if (!shipment) problem('lost', `order ${order.id} has no shipment`);
    else if ((order.status === 'cancelled') !== (shipment.status === 'cancelled')) {
      problem('outOfOrder', `order ${order.id} is ${order.status}, its shipment ${shipment.status}`);
    }
  }
  for (const marker of snapshot.cancelledMarkers) {
    problem('outOfOrder', `fulfillment applied the cancellation of ${marker.orderId} before its OrderPlaced`);
  }
  // Webhooks: one delivery per event, delivered; accepted by the receiver at least once; one order's in order.
  const deliveries = new Set<string>();
  for (const delivery of snapshot.webhookDeliveries) {
    deliveries.add(delivery.messageId);
    if (!outboxIds.has(delivery.messageId)) problem('duplicated', `webhook delivery of ${delivery.messageId}, which no outbox row has`);
    if (delivery.state !== 'delivered')
      problem('lost', `webhook delivery ${delivery.messageId} is ${delivery.state}${delivery.lastError ? `: ${delivery.lastError}` : ''}`);
  }
  for (const row of snapshot.outbox) {
    if (!deliveries.has(row.id)) problem('lost', `no webhook delivery of ${row.eventType} ${row.id}`);
  }
  const accepted = new Map<string, number>();
  const placedAccepted = new Set<string>();
  for (const post of snapshot.webhookPosts) {
    if (post.type === 'order.cancelled' && !placedAccepted.has(post.orderId)) {
      problem('outOfOrder', `the cancellation webhook of ${post.orderId} was POSTed before its order.placed was accepted`);
    }
    if (post.status >= 200 && post.status < 300) {
      accepted.set(post.messageId, (accepted.get(post.messageId) ?? 0) + 1);
      if (post.type === 'order.placed') placedAccepted.add(post.orderId);
    }
  }
  counts.webhookRepeats = [...accepted.values()].reduce((sum, n) => sum + n - 1, 0);
  for (const delivery of snapshot.webhookDeliveries) {
    if (delivery.state === 'delivered' && !accepted.has(delivery.messageId))
      problem('lost', `webhook delivery ${delivery.messageId} recorded as delivered but never accepted`);
  }

  return { counts, problems };
}
