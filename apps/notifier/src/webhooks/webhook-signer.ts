import { Webhook } from 'standardwebhooks';
import { WebhookHeaders } from '@app/contracts';

/**
 * Signs deliveries per Standard Webhooks with every secret in use: the current one, and during a
 * rotation the one being retired, so a receiver that knows either accepts them.
 */
export class WebhookSigner {
  private readonly keys: Webhook[];

  constructor(secrets: string[]) {
    this.keys = secrets.map((secret) => new Webhook(secret));
  }

  /** The headers of one attempt: signed now, over exactly `body`. */
  headers(webhookId: string, body: string, now = new Date()): Record<string, string> {
    return {
      [WebhookHeaders.id]: webhookId,
      [WebhookHeaders.timestamp]: String(Math.floor(now.getTime() / 1000)),
      [WebhookHeaders.signature]: this.keys.map((key) => key.sign(webhookId, now, body)).join(' '),
      [WebhookHeaders.idempotencyKey]: webhookId,
    };
  }
}
