import { z } from 'zod';

/** Thrown at boot when the environment does not satisfy an app's config schema. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration: ${problems.join('; ')}`);
    this.name = 'ConfigError';
  }
}

/** Variables whose values are never echoed in an error: a malformed secret is still mostly the secret. */
const SECRET_VARIABLE = /SECRET|PASSWORD|TOKEN|API_KEY/i;

/** `scheme://user:password@…` in any echoed value: the password (up to the last `@`, in case it holds one) is replaced. */
const URL_CREDENTIALS = /^([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*):(\S*)@/i;

/** What an error may show of a value: never a URL's password, even in a URL too malformed to parse. */
export function redactCredentials(value: string): string {
  return value.replace(URL_CREDENTIALS, '$1:***@');
}

/**
 * Validates `env` against `schema`; every problem names the variable it is about and shows its value,
 * unless it is a secret (its name says so), with any URL password masked.
 */
export function parseConfig<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv): z.infer<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const variable = issue.path.join('.') || '(environment)';
    const received = env[variable];
    const shown = received === undefined || SECRET_VARIABLE.test(variable) ? '' : ` (got ${JSON.stringify(redactCredentials(received))})`;
    return `${variable}: ${issue.message}${shown}`;
  });
  throw new ConfigError(problems);
}
