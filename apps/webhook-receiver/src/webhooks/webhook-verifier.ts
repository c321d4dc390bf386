import type { IncomingHttpHeaders } from 'node:http';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { WebhookHeaders } from '@app/contracts';

const MAX_ID_LENGTH = 256;

/** A delivery whose signature matched one of our secrets, within the timestamp tolerance. */
export interface VerifiedDelivery {
  /** The sender's id for this event, the same on every retry: the dedupe key. */
  webhookId: string;
  signedAt: Date;
}

/** The request does not prove it comes from the sender: answered 401, nothing stored. */
export class WebhookUnverified extends Error {}

/**
 * Verifies Standard Webhooks signatures with the `standardwebhooks` reference library: HMAC-SHA256
 * over `<webhook-id>.<webhook-timestamp>.<raw body>`, compared in constant time, and a timestamp
 * within 5 minutes of our clock either way (an old, replayed request is refused even if its signature
 * is good). Several secrets during a rotation: a delivery signed with any one of them is accepted.
 */
export class WebhookVerifier {
  private readonly keys: Webhook[];

  constructor(secrets: string[]) {
    this.keys = secrets.map((secret) => new Webhook(secret));
  }

  /** `rawBody` must be the exact bytes received: re-serialised JSON would not match the signature. */
  verify(rawBody: Buffer, headers: IncomingHttpHeaders): VerifiedDelivery {
    const webhookId = headers[WebhookHeaders.id];
    const timestamp = headers[WebhookHeaders.timestamp];
    const signature = headers[WebhookHeaders.signature];
    if (typeof webhookId !== 'string' || typeof timestamp !== 'string' || typeof signature !== 'string') {
      throw new WebhookUnverified(`Missing ${WebhookHeaders.id}, ${WebhookHeaders.timestamp} or ${WebhookHeaders.signature} header.`);
    }
    // It becomes a primary key: bounded well below PostgreSQL's index entry limit.
    if (webhookId.length < 1 || webhookId.length > MAX_ID_LENGTH)
      throw new WebhookUnverified(`${WebhookHeaders.id} must be 1 to ${MAX_ID_LENGTH} characters.`);
    // The library reads the timestamp with parseInt, which would take "1700000000abc": require plain digits.
    if (!/^\d{1,15}$/.test(timestamp)) throw new WebhookUnverified(`${WebhookHeaders.timestamp} must be unix seconds.`);
    let refusal = '';
    for (const key of this.keys) {
      try {
        key.verify(
          rawBody,
          { [WebhookHeaders.id]: webhookId, [WebhookHeaders.timestamp]: timestamp, [WebhookHeaders.signature]: signature },
          { jsonParse: false },
        );
        return { webhookId, signedAt: new Date(Number(timestamp) * 1000) };
      } catch (error) {
        if (!(error instanceof WebhookVerificationError)) throw error;
        refusal ||= error.message; // "Message timestamp too old", "No matching signature found", ...
      }
    }
    throw new WebhookUnverified(`${refusal}.`);
  }
}
