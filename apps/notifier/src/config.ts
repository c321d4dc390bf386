import { z } from 'zod';
import { DEVELOPMENT_WEBHOOK_SECRET, parseWebhookSecrets } from '@app/contracts';
import { consumerConfig, consumerConfigRules } from '@app/inbox';
import { envFields } from '@app/platform';
import { parseRetrySchedule } from './webhooks/retry-schedule';

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

/**
 * One `whsec_…` signing secret (Standard Webhooks: base64 of 24 to 64 random bytes). Whitespace around
 * it is dropped (a mounted secret file ends in a newline); what is checked is what signs.
 */
const secret = z
  .string()
  .trim()
  .superRefine((value, ctx) => {
    const parsed = parseWebhookSecrets(value);
    if ('problem' in parsed) ctx.addIssue({ code: 'custom', message: parsed.problem });
    else if (parsed.secrets.length !== 1 || parsed.secrets[0] !== value)
      ctx.addIssue({ code: 'custom', message: 'must be one whsec_ secret' });
  });

export const notifierConfig = z
  .object({
    NODE_ENV: envFields.nodeEnv,
    LOG_LEVEL: envFields.logLevel,
    SHUTDOWN_TIMEOUT_SECONDS: envFields.shutdownTimeoutSeconds,
    ...envFields.httpTimeouts,
    HOST: envFields.host,
    NOTIFIER_PORT: envFields.port(3003),
    /** /metrics and /docs are served here, not on the app's port (firewall it like any internal port). */
    MANAGEMENT_PORT: envFields.port(3103),
    NOTIFIER_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/notifier'),
    DATABASE_POOL_SIZE: envFields.poolSize,
    /** Where every order event is POSTed: by default the reference receiver `npm start` runs (apps/webhook-receiver). */
    WEBHOOK_URL: z
      .string()
      .default('http://127.0.0.1:3004/webhooks/orders')
      .refine((value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol), {
        message: 'must be an http:// or https:// URL',
      }),
    /** The endpoint's signing secret. Required in production; elsewhere DEVELOPMENT_WEBHOOK_SECRET (libs/contracts). */
    WEBHOOK_SECRET: secret.optional(),
    /** During a rotation, the secret being retired: deliveries carry a signature with each, until the receiver has the new one. */
    WEBHOOK_PREVIOUS_SECRET: secret.optional(),
    /** One POST's bound; a timeout is a failed attempt, retried on the schedule. */
    WEBHOOK_TIMEOUT_MS: int(100, 60_000).default(5_000),
    /**
     * Waits before each retry of a failed delivery, comma-separated (`5s`, `30m`, `10h`, `3d`); when they
     * are spent the delivery is dead. The default is the Standard Webhooks schedule: 8 attempts over about 28 hours.
     */
    WEBHOOK_RETRY_SCHEDULE: z
      .string()
      .default('5s,5m,30m,2h,5h,10h,10h')
      .transform((value, ctx) => {
        const parsed = parseRetrySchedule(value);
        if ('problem' in parsed) {
          ctx.addIssue({ code: 'custom', message: parsed.problem });
          return z.NEVER;
        }
        return parsed.delaysMs;
      }),
    /** POSTs in flight at once (over all orders; one order's deliveries go one at a time, in order). */
    WEBHOOK_CONCURRENCY: int(1, 1_000).default(64),
    /** How often the dispatcher looks for deliveries that became due (new ones wake it at once). */
    WEBHOOK_POLL_INTERVAL_MS: int(10, 60_000).default(500),
    /**
     * The consumer's settings (libs/inbox consumerConfig): KAFKA_BROKERS, NOTIFIER_MAX_ATTEMPTS, … and
     * INBOX_RETENTION_SECONDS, which also bounds how long delivered webhooks are kept. Outbox replays must
     * not reach further back (ops refuses).
     */
    ...consumerConfig('NOTIFIER', { maxAttempts: 8, retryMaxMs: 30_000 }),
  })
  .superRefine(consumerConfigRules('NOTIFIER'))
  .refine((c) => c.NODE_ENV !== 'production' || c.WEBHOOK_SECRET !== undefined, {
    path: ['WEBHOOK_SECRET'],
    message: 'is required in production (a whsec_ secret shared with the receiver only)',
  })
  .refine((c) => c.NODE_ENV !== 'production' || ![c.WEBHOOK_SECRET, c.WEBHOOK_PREVIOUS_SECRET].includes(DEVELOPMENT_WEBHOOK_SECRET), {
    path: ['WEBHOOK_SECRET'],
    message: 'must not be the development secret in production (it is published in the repository)',
  })
  .refine((c) => c.NODE_ENV !== 'production' || new URL(c.WEBHOOK_URL).protocol === 'https:', {
    path: ['WEBHOOK_URL'],
    message: 'must be https:// in production (the payload and its signature must not travel in clear)',
  })
  .transform((c) => ({ ...c, WEBHOOK_SECRET: c.WEBHOOK_SECRET ?? DEVELOPMENT_WEBHOOK_SECRET }));

export type NotifierConfig = z.infer<typeof notifierConfig>;
