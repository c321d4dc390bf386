import { randomBytes } from 'node:crypto';
import { ConfigError, parseConfig } from '@app/platform';
import { DEVELOPMENT_WEBHOOK_SECRET, parseWebhookSecrets as parseSecrets } from '@app/contracts';
import { webhookReceiverConfig } from './config';

const secret = (bytes = 32) => `whsec_${randomBytes(bytes).toString('base64')}`;

function problems(env: NodeJS.ProcessEnv): string[] {
  try {
    parseConfig(webhookReceiverConfig, env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('parseSecrets', () => {
  it('reads one or several secrets separated by spaces or commas', () => {
    const [a, b, c] = [secret(), secret(24), secret(64)];
    expect(parseSecrets(a)).toEqual({ secrets: [a] });
    expect(parseSecrets(` ${a}, ${b}\n${c} `)).toEqual({ secrets: [a, b, c] });
  });

  it.each([
    ['', 'at least one'],
    [' , ', 'at least one'],
    [randomBytes(32).toString('base64'), 'must start with whsec_'],
    ['whsec_not*base64!', 'must be whsec_ followed by base64'],
    ['whsec_abc', 'must be whsec_ followed by base64'],
    [secret(16), 'this one has 16'],
    [secret(65), 'this one has 65'],
  ])('refuses %p', (value, problem) => {
    expect(parseSecrets(value)).toEqual({ problem: expect.stringContaining(problem) });
  });

  it('names which secret of a list is wrong', () => {
    expect(parseSecrets(`${secret()} whsec_short`)).toEqual({ problem: expect.stringMatching(/^secret 2: /) });
  });
});

describe('webhookReceiverConfig', () => {
  it('accepts the development secret by default outside production', () => {
    expect(parseConfig(webhookReceiverConfig, {})).toMatchObject({
      WEBHOOK_RECEIVER_SECRETS: [DEVELOPMENT_WEBHOOK_SECRET],
      WEBHOOK_RECEIVER_PORT: 3004,
      WEBHOOK_RECEIVER_DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/webhook_receiver',
    });
    expect(parseSecrets(DEVELOPMENT_WEBHOOK_SECRET)).toEqual({ secrets: [DEVELOPMENT_WEBHOOK_SECRET] });
  });

  it('has no default in production', () => {
    expect(problems({ NODE_ENV: 'production' })).toEqual([expect.stringMatching(/^WEBHOOK_RECEIVER_SECRETS: is required in production/)]);
  });

  it('refuses the published development secret in production', () => {
    const env = { NODE_ENV: 'production', WEBHOOK_RECEIVER_SECRETS: `${secret()} ${DEVELOPMENT_WEBHOOK_SECRET}` };
    expect(problems(env)).toEqual([expect.stringMatching(/^WEBHOOK_RECEIVER_SECRETS: must not include the development secret/)]);
  });

  it('takes production secrets as given', () => {
    const [current, previous] = [secret(), secret()];
    const config = parseConfig(webhookReceiverConfig, { NODE_ENV: 'production', WEBHOOK_RECEIVER_SECRETS: `${current},${previous}` });
    expect(config.WEBHOOK_RECEIVER_SECRETS).toEqual([current, previous]);
  });

  it('names the variable when a secret is malformed', () => {
    expect(problems({ WEBHOOK_RECEIVER_SECRETS: 'whsec_short' })).toEqual([
      expect.stringMatching(/^WEBHOOK_RECEIVER_SECRETS: must be whsec_ followed by base64/),
    ]);
  });
});
