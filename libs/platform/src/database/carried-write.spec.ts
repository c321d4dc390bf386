import { CarriedWrite, carriedInsert, carrying } from './carried-write';

const write = (name: string, rows: unknown[][]): CarriedWrite => ({
  name,
  table: name,
  columns: [
    ['a', 'uuid'],
    ['b', 'int'],
  ],
  rows,
});

describe('carrying', () => {
  it('leaves a statement that carries nothing as it is', () => {
    expect(carrying([], 'UPDATE t SET a = $1', [1])).toEqual(['UPDATE t SET a = $1', [1]]);
  });

  it("numbers each write's parameters on from those before it, row by row, in the order given, each cast to its column's type", () => {
    const [sql, parameters] = carrying(
      [
        write('first', [
          ['a1', 1],
          ['a2', 2],
        ]),
        write('second', [['a3', 3]]),
      ],
      'UPDATE t SET x = $1 WHERE y = $2',
      ['x', 'y'],
    );
    expect(sql).toBe(
      'WITH first AS (INSERT INTO first (a, b) VALUES ($3::uuid, $4::int), ($5::uuid, $6::int)),\n' +
        'second AS (INSERT INTO second (a, b) VALUES ($7::uuid, $8::int))\n' +
        'UPDATE t SET x = $1 WHERE y = $2',
    );
    expect(parameters).toEqual(['x', 'y', 'a1', 1, 'a2', 2, 'a3', 3]);
  });

  it('puts `before` first and makes every write wait for `onlyIf`', () => {
    const [sql] = carrying([write('w', [['a1', 1]])], 'SELECT * FROM c', [7], {
      before: 'c AS (SELECT $1::int AS n)',
      onlyIf: 'EXISTS (SELECT FROM c)',
    });
    expect(sql).toBe(
      'WITH c AS (SELECT $1::int AS n),\n' +
        'w AS (INSERT INTO w (a, b) SELECT * FROM (VALUES ($2::uuid, $3::int)) AS carried WHERE EXISTS (SELECT FROM c))\n' +
        'SELECT * FROM c',
    );
  });

  it('writes a lone insert from parameter 1', () => {
    expect(carriedInsert(write('t', [['a1', 1]]), 1)).toBe('INSERT INTO t (a, b) VALUES ($1::uuid, $2::int)');
  });
});

describe('carrying the same shape again', () => {
  const columns = [
    ['a', 'uuid'],
    ['b', 'int'],
  ] as const;
  const carried = (rows: unknown[][], parameters: unknown[] = ['x']) =>
    carrying([{ name: 'w', table: 't', columns, rows }], 'SELECT $1::text', parameters, { onlyIf: 'true' });

  it('gives the same string object with the new parameters, and its own text to every other shape', () => {
    const [first, firstParameters] = carried([['a1', 1]]);
    const [again, againParameters] = carried([['a2', 2]], ['y']);
    expect(again).toBe(first);
    expect(firstParameters).toEqual(['x', 'a1', 1]);
    expect(againParameters).toEqual(['y', 'a2', 2]);
    // Two rows, or one more parameter before them: other numbering, other text.
    const [twoRows] = carried([
      ['a1', 1],
      ['a2', 2],
    ]);
    expect(twoRows).toContain('($2::uuid, $3::int), ($4::uuid, $5::int)');
    const [shifted] = carried([['a1', 1]], ['x', 'z']);
    expect(shifted).toContain('($3::uuid, $4::int)');
    expect(new Set([first, twoRows, shifted]).size).toBe(3);
  });

  it('builds every text right also past the number of shapes it remembers', () => {
    for (let i = 0; i < 600; i++) {
      const [sql, parameters] = carrying([write(`w${i}`, [['a', i]])], `SELECT ${i}`, []);
      expect(sql).toBe(`WITH w${i} AS (INSERT INTO w${i} (a, b) VALUES ($1::uuid, $2::int))\nSELECT ${i}`);
      expect(parameters).toEqual(['a', i]);
    }
  });
});
