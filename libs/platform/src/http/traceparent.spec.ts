import { childTraceparent } from './traceparent';

describe('childTraceparent', () => {
  it('continues the caller trace with a new span id', () => {
    const incoming = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const child = childTraceparent(incoming);
    expect(child).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    expect(child).not.toBe(incoming);
  });

  it.each([undefined, '', 'garbage', '00-00000000000000000000000000000000-00f067aa0ba902b7-01'])(
    'starts a new sampled trace when the caller sent %p',
    (incoming) => {
      expect(childTraceparent(incoming)).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    },
  );
});
