import { z } from 'zod';
import { DEVELOPMENT_WEBHOOK_SECRET, parseWebhookSecrets } from '@app/contracts';
import { envFields } from '@app/platform';

export const webhookReceiverConfig = z
  .object({
    NODE_ENV: envFields.nodeEnv,
    LOG_LEVEL: envFields.logLevel,
    SHUTDOWN_TIMEOUT_SECONDS: envFields.shutdownTimeoutSeconds,
    ...envFields.httpTimeouts,
    HOST: envFields.host,
    WEBHOOK_RECEIVER_PORT: envFields.port(3004),
    /** /metrics and /docs are served here, not on the public port (firewall it like any internal port). */
    MANAGEMENT_PORT: envFields.port(3104),
    WEBHOOK_RECEIVER_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/webhook_receiver'),
    DATABASE_POOL_SIZE: envFields.poolSize,
    /** The endpoint's signing secrets. Required in production; elsewhere DEVELOPMENT_WEBHOOK_SECRET. */
    WEBHOOK_RECEIVER_SECRETS: z
      .string()
      .optional()
      .transform((value, ctx) => {
        if (value === undefined) return undefined;
        const parsed = parseWebhookSecrets(value);
        if ('problem' in parsed) {
          ctx.addIssue({ code: 'custom', message: parsed.problem });
          return z.NEVER;
        }
        return parsed.secrets;
      }),
  })
  .refine((c) => c.NODE_ENV !== 'production' || c.WEBHOOK_RECEIVER_SECRETS !== undefined, {
    path: ['WEBHOOK_RECEIVER_SECRETS'],
    message: 'is required in production (the whsec_ secrets shared with the sender only)',
  })
  .refine((c) => c.NODE_ENV !== 'production' || !c.WEBHOOK_RECEIVER_SECRETS?.includes(DEVELOPMENT_WEBHOOK_SECRET), {
    path: ['WEBHOOK_RECEIVER_SECRETS'],
    message: 'must not include the development secret in production (it is published in the repository)',
  })
  .transform((c) => ({ ...c, WEBHOOK_RECEIVER_SECRETS: c.WEBHOOK_RECEIVER_SECRETS ?? [DEVELOPMENT_WEBHOOK_SECRET] }));

export type WebhookReceiverConfig = z.infer<typeof webhookReceiverConfig>;
