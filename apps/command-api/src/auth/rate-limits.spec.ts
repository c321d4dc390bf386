import { ConfigService } from '@nestjs/config';
import fc from 'fast-check';
import { CommandApiConfig } from '../config';
import { RateLimits } from './rate-limits';

/** A budget of `failures` failed authentications per address and window. */
function limits(failures: number): RateLimits {
  const values: Record<string, number> = {
    RATE_LIMIT_WINDOW_SECONDS: 60,
    RATE_LIMIT_CLIENT_REQUESTS: 0,
    RATE_LIMIT_UNAUTHENTICATED_REQUESTS: failures,
  };
  return new RateLimits({ get: (name: string) => values[name] } as unknown as ConfigService<CommandApiConfig, true>);
}

/** Whether `address` is refused before its key is looked up. */
const refused = (rateLimits: RateLimits, address: string) =>
  rateLimits.beforeLookup(address).then(
    () => false,
    () => true,
  );

const hextet = fc.integer({ min: 0, max: 0xffff });
const groups = fc.array(hextet, { minLength: 8, maxLength: 8 });
/** The full form (every group, no `::`), and the form a socket reports (compressed, as the URL standard writes it). */
const full = (g: number[]) => g.map((n) => n.toString(16)).join(':');
const compressed = (g: number[]) => new URL(`http://[${full(g)}]/`).hostname.slice(1, -1);

describe('RateLimits: the budget of failed authentications per source address', () => {
  it('counts an IPv6 address by its /64, the block one host is given, so rotating addresses in it buys nothing', async () => {
    await fc.assert(
      fc.asyncProperty(groups, groups, async (first, other) => {
        const rateLimits = limits(2);
        for (let i = 0; i < 2; i++) await rateLimits.failedAuthentication(compressed(first));
        // Another address of the same /64: refused, whichever way it is written.
        const sameBlock = [...first.slice(0, 4), ...other.slice(4)];
        expect(await refused(rateLimits, compressed(sameBlock))).toBe(true);
        expect(await refused(rateLimits, full(sameBlock))).toBe(true);
        // An address of another /64: its own budget.
        const otherBlock = other.slice(0, 4).join() !== first.slice(0, 4).join();
        expect(await refused(rateLimits, compressed(other))).toBe(!otherBlock);
      }),
      {
        numRuns: 200,
        examples: [
          [
            [0x2001, 0xdb8, 0, 0, 0, 0, 0, 1],
            [0, 0, 0, 0, 0, 0, 0, 2],
          ],
        ],
      },
    );
  });

  it('counts an IPv4 address alone, whether the socket reports it as IPv4 or IPv4-mapped IPv6', async () => {
    const rateLimits = limits(2);
    await rateLimits.failedAuthentication('::ffff:192.0.2.7');
    await rateLimits.failedAuthentication('192.0.2.7');
    expect(await refused(rateLimits, '192.0.2.7')).toBe(true);
    expect(await refused(rateLimits, '::ffff:192.0.2.7')).toBe(true);
    expect(await refused(rateLimits, '192.0.2.8')).toBe(false);
    expect(await refused(rateLimits, '::ffff:192.0.2.8')).toBe(false);
  });
});
