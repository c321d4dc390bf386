import { z } from 'zod';

/** Thrown at boot when the environment does not satisfy an app's config schema. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration: ${problems.join('; ')}`);
    this.name = 'ConfigError';
  }
}

/** Validates `env` against `schema`; every problem names the variable it is about. */
export function parseConfig<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv): z.infer<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const variable = issue.path.join('.') || '(environment)';
    const received = env[variable];
    const shown = received === undefined ? '' : ` (got ${JSON.stringify(received)})`;
    return `${variable}: ${issue.message}${shown}`;
  });
  throw new ConfigError(problems);
}
