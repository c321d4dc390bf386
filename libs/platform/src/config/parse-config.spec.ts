import { z } from 'zod';
import { envFields } from './env-fields';
import { ConfigError, parseConfig } from './parse-config';

const schema = z.object({
  LOG_LEVEL: envFields.logLevel,
  API_PORT: envFields.port(3000),
  ORDERS_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/orders'),
  KAFKA_BROKERS: envFields.kafkaBrokers,
  STRICT: envFields.flag(true),
});

function problemsOf(env: NodeJS.ProcessEnv): string[] {
  try {
    parseConfig(schema, env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('parseConfig', () => {
  it('applies the documented defaults to an empty environment', () => {
    expect(parseConfig(schema, {})).toEqual({
      LOG_LEVEL: 'info',
      API_PORT: 3000,
      ORDERS_DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/orders',
      KAFKA_BROKERS: ['127.0.0.1:9092'],
      STRICT: true,
    });
  });

  it('coerces numbers, splits broker lists and reads boolean words', () => {
    const config = parseConfig(schema, { API_PORT: '8080', KAFKA_BROKERS: 'a:9092, b:9093', STRICT: 'false' });
    expect(config).toMatchObject({ API_PORT: 8080, KAFKA_BROKERS: ['a:9092', 'b:9093'], STRICT: false });
  });

  it.each([
    ['API_PORT', 'eighty'],
    ['API_PORT', '70000'],
    ['LOG_LEVEL', 'loud'],
    ['ORDERS_DATABASE_URL', 'mysql://root@localhost/orders'],
    ['KAFKA_BROKERS', 'no-port-here'],
    ['STRICT', 'maybe'],
  ])('rejects %s=%s with a message naming the variable and the value', (variable, value) => {
    const [problem, ...rest] = problemsOf({ [variable]: value });
    expect(rest).toEqual([]);
    expect(problem).toMatch(new RegExp(`^${variable}: .+ \\(got ${JSON.stringify(value)}\\)$`));
  });

  it('reports every bad variable at once, in one message', () => {
    const env = { API_PORT: '-1', KAFKA_BROKERS: ',' };
    expect(
      problemsOf(env)
        .map((p) => p.split(':')[0])
        .sort(),
    ).toEqual(['API_PORT', 'KAFKA_BROKERS']);
    expect(() => parseConfig(schema, env)).toThrow(/^Invalid configuration: .*API_PORT.*KAFKA_BROKERS/);
  });

  it('never echoes the value of a secret variable', () => {
    const secretSchema = z.object({ WEBHOOK_SECRET: z.string().startsWith('whsec_') });
    try {
      parseConfig(secretSchema, { WEBHOOK_SECRET: 'hunter2-almost-a-secret' });
      throw new Error('expected a ConfigError');
    } catch (error) {
      expect((error as ConfigError).problems).toEqual([expect.stringMatching(/^WEBHOOK_SECRET: /)]);
      expect((error as Error).message).not.toContain('hunter2');
    }
  });

  it.each([
    ['postgres://app:hunter2@db.internal:notaport/orders', 'postgres://app:***@db.internal:notaport/orders'],
    ['postgres://app:p@ss:w0rd@db.internal:5432/orders with a space', 'postgres://app:***@db.internal:5432/orders with a space'],
    ['postgresql://:hunter2@/orders?host=/var/run/x y', 'postgresql://:***@/orders?host=/var/run/x y'],
  ])('shows a malformed database URL without its password: %s', (url, shown) => {
    const urlSchema = z.object({ ORDERS_DATABASE_URL: envFields.postgresUrl('postgres://postgres@127.0.0.1:5432/orders') });
    try {
      parseConfig(urlSchema, { ORDERS_DATABASE_URL: url });
      throw new Error('expected a ConfigError');
    } catch (error) {
      expect((error as ConfigError).problems).toEqual([`ORDERS_DATABASE_URL: must be a postgres:// URL (got ${JSON.stringify(shown)})`]);
      expect((error as Error).message).not.toMatch(/hunter2|p@ss|w0rd/);
    }
  });
});
