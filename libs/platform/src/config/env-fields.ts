import { z } from 'zod';

/** A comma-separated list, its entries trimmed and empty ones dropped ('' is an empty list). */
function commaList(fallback: string) {
  return z
    .string()
    .default(fallback)
    .transform((value) =>
      value
        .split(',')
        .map((entry) => entry.trim())
        .filter(Boolean),
    );
}

/** Reusable environment fields, so every app spells and validates them the same way. */
export const envFields = {
  nodeEnv: z.enum(['development', 'test', 'production']).default('development'),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  host: z.string().min(1).default('127.0.0.1'),
  port: (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback),
  postgresUrl: (fallback: string) =>
    z
      .string()
      .default(fallback)
      .refine((value) => /^postgres(ql)?:\/\/[^\s]+$/.test(value) && URL.canParse(value), {
        message: 'must be a postgres:// URL',
      }),
  poolSize: z.coerce.number().int().min(1).max(200).default(10),
  /**
   * How long a graceful shutdown (SIGTERM, SIGINT) may take before the process gives up on it, logs
   * why and exits 1. Below an orchestrator's own grace period (Kubernetes: 30 s) so the reason is logged.
   */
  shutdownTimeoutSeconds: z.coerce.number().int().min(1).max(3600).default(25),
  /**
   * How long a request's head, then the whole request, may take to arrive (Node's `headersTimeout` and
   * `requestTimeout`, 60 s and 300 s by default): past it the client gets a 408 and the connection closes.
   * The time the app takes to answer is not counted. Spread into every HTTP app's schema; `runHttpApp`
   * refuses a head's bound above the request's.
   */
  httpTimeouts: {
    HTTP_HEADERS_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(600).default(10),
    HTTP_REQUEST_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3600).default(30),
  },
  commaList,
  kafkaBrokers: commaList('127.0.0.1:9092').refine((brokers) => brokers.length > 0 && brokers.every((b) => /^[^\s:]+:\d{1,5}$/.test(b)), {
    message: 'must be a comma-separated list of host:port',
  }),
  flag: (fallback: boolean) => z.stringbool().default(fallback),
};
