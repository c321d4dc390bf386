import { retryOnLostSession } from './lost-session';

const lost = () => Object.assign(new Error('Connection terminated unexpectedly'), {});
const terminated = () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
const timedOut = () => Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' });

function failing(errors: Error[], result = 'done') {
  let calls = 0;
  const work = async () => {
    const error = errors[calls++];
    if (error) throw error;
    return result;
  };
  return { work, calls: () => calls };
}

describe('retryOnLostSession', () => {
  it('runs the work again after a lost or terminated session, and returns its answer', async () => {
    const { work, calls } = failing([lost(), terminated()]);
    await expect(retryOnLostSession(work, { pausesMs: [0] })).resolves.toBe('done');
    expect(calls()).toBe(3);
  });

  it('gives up after its attempts, with the last error', async () => {
    const errors = [lost(), lost(), terminated()];
    const { work, calls } = failing(errors);
    await expect(retryOnLostSession(work, { attempts: 3, pausesMs: [0] })).rejects.toBe(errors[2]);
    expect(calls()).toBe(3);
  });

  it('never retries a statement error or a non-database error', async () => {
    for (const error of [timedOut(), new TypeError('bug')]) {
      const { work, calls } = failing([error]);
      await expect(retryOnLostSession(work, { pausesMs: [0] })).rejects.toBe(error);
      expect(calls()).toBe(1);
    }
  });

  it('starts no rerun once its time budget is spent', async () => {
    const { work, calls } = failing([lost(), lost()]);
    await expect(retryOnLostSession(work, { budgetMs: 50, pausesMs: [60] })).rejects.toThrow('Connection terminated');
    expect(calls()).toBe(1);
  });
});
