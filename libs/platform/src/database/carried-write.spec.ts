import { CarriedWrite, carrying } from './carried-write';

const write = (name: string, values: unknown[]): CarriedWrite => ({
  name,
  sql: (n) => `INSERT INTO ${name} VALUES (${values.map((_, i) => `$${n + i}`).join(', ')})`,
  parameters: values,
});

describe('carrying', () => {
  it('leaves a statement that carries nothing as it is', () => {
    expect(carrying([], 'UPDATE t SET a = $1', [1])).toEqual(['UPDATE t SET a = $1', [1]]);
  });

  it("numbers each write's parameters on from those before it, in the order given", () => {
    const [sql, parameters] = carrying([write('first', ['a', 'b']), write('second', ['c'])], 'UPDATE t SET x = $1 WHERE y = $2', [
      'x',
      'y',
    ]);
    expect(sql).toBe(
      'WITH first AS (INSERT INTO first VALUES ($3, $4)),\nsecond AS (INSERT INTO second VALUES ($5))\nUPDATE t SET x = $1 WHERE y = $2',
    );
    expect(parameters).toEqual(['x', 'y', 'a', 'b', 'c']);
  });
});
