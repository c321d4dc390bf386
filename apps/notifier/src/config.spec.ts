import { randomBytes } from 'node:crypto';
import { DEVELOPMENT_WEBHOOK_SECRET } from '@app/contracts';
import { ConfigError, parseConfig } from '@app/platform';
import { notifierConfig } from './config';
import { WebhookSigner } from './webhooks/webhook-signer';

const secret = () => `whsec_${randomBytes(32).toString('base64')}`;

function problems(env: Record<string, string>): string[] {
  try {
    parseConfig(notifierConfig, env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  return [];
}

describe('notifier webhook configuration', () => {
  it('outside production: the reference receiver, the development secret and the Standard Webhooks schedule', () => {
    expect(parseConfig(notifierConfig, {})).toMatchObject({
      WEBHOOK_URL: 'http://127.0.0.1:3004/webhooks/orders',
      WEBHOOK_SECRET: DEVELOPMENT_WEBHOOK_SECRET,
      WEBHOOK_RETRY_SCHEDULE: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
    });
  });

  it('in production: a secret of its own and https, or it does not boot', () => {
    expect(problems({ NODE_ENV: 'production' }).join('\n')).toMatch(/WEBHOOK_SECRET.*required in production/);
    expect(
      problems({ NODE_ENV: 'production', WEBHOOK_SECRET: DEVELOPMENT_WEBHOOK_SECRET, WEBHOOK_URL: 'https://example.com/hooks' }).join('\n'),
    ).toMatch(/WEBHOOK_SECRET.*development secret/);
    expect(problems({ NODE_ENV: 'production', WEBHOOK_SECRET: secret() }).join('\n')).toMatch(/WEBHOOK_URL.*https/);
    expect(problems({ NODE_ENV: 'production', WEBHOOK_SECRET: secret(), WEBHOOK_URL: 'https://example.com/hooks' })).toEqual([]);
  });

  it('applies four partitions at once by default, and refuses more partitions in flight than the pool has connections', () => {
    expect(parseConfig(notifierConfig, {})).toMatchObject({ KAFKA_PARTITIONS_CONCURRENTLY: 4, DATABASE_POOL_SIZE: 10 });
    expect(problems({ KAFKA_PARTITIONS_CONCURRENTLY: '10' }).join('\n')).toMatch(
      /KAFKA_PARTITIONS_CONCURRENTLY.*below DATABASE_POOL_SIZE \(10\)/,
    );
    expect(problems({ KAFKA_PARTITIONS_CONCURRENTLY: '12', DATABASE_POOL_SIZE: '16' })).toEqual([]);
    expect(problems({ KAFKA_PARTITIONS_CONCURRENTLY: '0' }).join('\n')).toMatch(/KAFKA_PARTITIONS_CONCURRENTLY/);
  });

  it('refuses a malformed secret, two secrets in WEBHOOK_SECRET and an unreadable schedule, with the reason', () => {
    expect(problems({ WEBHOOK_SECRET: 'hunter2' }).join('\n')).toMatch(/WEBHOOK_SECRET.*whsec_/);
    expect(problems({ WEBHOOK_SECRET: `${secret()} ${secret()}` }).join('\n')).toMatch(/WEBHOOK_SECRET.*one whsec_ secret/);
    expect(problems({ WEBHOOK_RETRY_SCHEDULE: '5s,soon' }).join('\n')).toMatch(/WEBHOOK_RETRY_SCHEDULE.*"soon" is not a duration/);
  });

  it('uses a secret without the whitespace around it (a mounted secret file ends in a newline), and refuses anything else beside it', () => {
    const [current, previous] = [secret(), secret()];
    const config = parseConfig(notifierConfig, { WEBHOOK_SECRET: `${current}\n`, WEBHOOK_PREVIOUS_SECRET: ` ${previous}\r\n` });
    expect(config).toMatchObject({ WEBHOOK_SECRET: current, WEBHOOK_PREVIOUS_SECRET: previous });
    // What the dispatcher builds from it: standardwebhooks refuses a key with a newline ("Base64Coder: incorrect characters").
    expect(() => new WebhookSigner([config.WEBHOOK_SECRET, config.WEBHOOK_PREVIOUS_SECRET!])).not.toThrow();
    expect(problems({ WEBHOOK_SECRET: `${current},` }).join('\n')).toMatch(/WEBHOOK_SECRET.*one whsec_ secret/);
    expect(
      problems({
        NODE_ENV: 'production',
        WEBHOOK_SECRET: `${DEVELOPMENT_WEBHOOK_SECRET}\n`,
        WEBHOOK_URL: 'https://example.com/hooks',
      }).join('\n'),
    ).toMatch(/WEBHOOK_SECRET.*development secret/);
    expect(
      problems({
        NODE_ENV: 'production',
        WEBHOOK_SECRET: current,
        WEBHOOK_PREVIOUS_SECRET: ` ${DEVELOPMENT_WEBHOOK_SECRET}`,
        WEBHOOK_URL: 'https://example.com/hooks',
      }).join('\n'),
    ).toMatch(/WEBHOOK_SECRET.*development secret/);
  });

  it('signs with both secrets during a rotation', () => {
    const [current, previous] = [secret(), secret()];
    expect(parseConfig(notifierConfig, { WEBHOOK_SECRET: current, WEBHOOK_PREVIOUS_SECRET: previous })).toMatchObject({
      WEBHOOK_SECRET: current,
      WEBHOOK_PREVIOUS_SECRET: previous,
    });
  });
});
