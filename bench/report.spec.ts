import fc from 'fast-check';
import { combineRounds, ScenarioRun } from './report';

const run = (name: string, perSecond: number, p99Ms = 10): ScenarioRun => ({
  name,
  measures: name,
  connections: 1,
  unexpected: 0,
  requests: 100,
  units: 100,
  seconds: 100 / perSecond,
  perSecond,
  unitsPerSecond: perSecond,
  p50Ms: p99Ms / 2,
  p99Ms,
  apiCpuMsPerRequest: 0.5,
});

describe('combineRounds', () => {
  it("takes each ratio as the mean of the rounds' ratios to their own round's baseline", () => {
    // The baseline halves in round 2 and the scenario with it: its ratio is 0.5 in both rounds.
    const [baseline, scenario] = combineRounds([
      [run('bare', 2000), run('ours', 1000)],
      [run('bare', 1000), run('ours', 500)],
    ]);
    expect(baseline.perSecondVsBaseline).toBe(1);
    expect(scenario.perSecondVsBaseline).toBeCloseTo(0.5, 10);
    expect(scenario.perSecond).toBe(750);
    expect(scenario.requests).toBe(200);
    expect(scenario.rounds.map((r) => r.perSecondVsBaseline)).toEqual([0.5, 0.5]);
  });

  it('keeps the first round order, finds each scenario by name in later rounds, and takes medians of latencies', () => {
    const [bare, a, b] = combineRounds([
      [run('bare', 100, 10), run('a', 50, 20), run('b', 200, 5)],
      [run('b', 100, 7), run('a', 50, 30), run('bare', 100, 12)],
      [run('bare', 100, 11), run('a', 50, 90), run('b', 100, 6)],
    ]);
    expect([bare.name, a.name, b.name]).toEqual(['bare', 'a', 'b']);
    expect(a.p99Ms).toBe(30);
    expect(b.p99Ms).toBe(6);
    expect(a.p99VsBaseline).toBeCloseTo(30 / 11, 10);
    expect(b.perSecondVsBaseline).toBeCloseTo((2 + 1 + 1) / 3, 10);
  });

  it("lies between the lowest and the highest round's ratio, and equals the plain ratio for one round", () => {
    const rates = fc.double({ min: 1, max: 100_000, noNaN: true });
    fc.assert(
      fc.property(fc.array(fc.tuple(rates, rates), { minLength: 1, maxLength: 10 }), (pairs) => {
        const [, ours] = combineRounds(pairs.map(([bare, mine]) => [run('bare', bare), run('ours', mine)]));
        const ratios = pairs.map(([bare, mine]) => mine / bare);
        expect(ours.perSecondVsBaseline).toBeGreaterThanOrEqual(Math.min(...ratios) * (1 - 1e-12));
        expect(ours.perSecondVsBaseline).toBeLessThanOrEqual(Math.max(...ratios) * (1 + 1e-12));
        if (pairs.length === 1) expect(ours.perSecondVsBaseline).toBeCloseTo(ratios[0], 10);
      }),
    );
  });
});
