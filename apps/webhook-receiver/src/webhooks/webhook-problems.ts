import { ProblemException, ProblemMapper, problemType } from '@app/platform';
import { WebhookUnverified } from './webhook-verifier';

/** Every error the receiver answers with. A sender retries 5xx (and 408, 429); any other 4xx tells it to stop. */
const catalog = {
  'WEBHOOK.UNVERIFIED': { status: 401, slug: 'webhook-unverified', title: 'Webhook signature not verified' },
  'WEBHOOK.INVALID': { status: 400, slug: 'webhook-invalid', title: 'Webhook body not understood' },
  'REQUEST.TOO_LARGE': { status: 413, slug: 'request-too-large', title: 'Request body too large' },
  'REQUEST.UNSUPPORTED_ENCODING': { status: 415, slug: 'unsupported-content-encoding', title: 'Unsupported content encoding' },
  'REQUEST.INVALID': { status: 400, slug: 'invalid-request', title: 'Invalid request' },
} as const;

export type WebhookProblemCode = keyof typeof catalog;

export function webhookProblem(code: WebhookProblemCode, detail: string, extensions: Record<string, unknown> = {}): ProblemException {
  const { status, slug, title } = catalog[code];
  // RFC 9110 wants a challenge on every 401; no registered scheme covers signed requests, so this names the one expected.
  const headers: Record<string, string> = status === 401 ? { 'WWW-Authenticate': 'StandardWebhooks' } : {};
  return new ProblemException({ type: problemType(slug), title, status, detail, code, ...extensions }, headers);
}

export const webhookReceiverProblems: ProblemMapper = (error) =>
  error instanceof WebhookUnverified ? webhookProblem('WEBHOOK.UNVERIFIED', error.message) : undefined;
