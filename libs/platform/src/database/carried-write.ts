/**
 * Rows to insert that ride in another statement as a data-modifying CTE (`WITH <name> AS (INSERT …)
 * <statement>`), so that both take one round trip and succeed or fail together. Described, not
 * written as SQL, so that the carrying statement can make the write conditional (`onlyIf`): a writer
 * cannot forget the condition.
 */
export interface CarriedWrite {
  /** The CTE's name: unique among the writes one statement carries. */
  name: string;
  table: string;
  /** Each column written and the SQL type its values are cast to (the rows keep their types also under a condition). */
  columns: ReadonlyArray<readonly [column: string, type: string]>;
  /** One array of values per row, in the order of `columns`. */
  rows: ReadonlyArray<readonly unknown[]>;
}

/**
 * The INSERT of `write`, its parameters numbered from `firstParameter` (row by row). With `onlyIf` (an
 * SQL condition) it inserts its rows only where that holds, and nothing otherwise.
 */
export function carriedInsert(write: CarriedWrite, firstParameter: number, onlyIf?: string): string {
  const width = write.columns.length;
  const values = write.rows
    .map((_, row) => `(${write.columns.map(([, type], column) => `$${firstParameter + row * width + column}::${type}`).join(', ')})`)
    .join(', ');
  const target = `INSERT INTO ${write.table} (${write.columns.map(([column]) => column).join(', ')})`;
  return onlyIf === undefined ? `${target} VALUES ${values}` : `${target} SELECT * FROM (VALUES ${values}) AS carried WHERE ${onlyIf}`;
}

/** The parameters of `write`, in the order `carriedInsert` numbers them. */
export function carriedParameters(write: CarriedWrite): unknown[] {
  return write.rows.flat();
}

/**
 * `statement` (parameters $1..$n) carrying `writes` (each numbered on from the parameters before it):
 * the SQL text and all parameters. `before`: CTEs the statement and the writes may read, written first
 * (their parameters among the statement's); `onlyIf`: a condition on them every write is made to wait for.
 */
export function carrying(
  writes: readonly CarriedWrite[],
  statement: string,
  parameters: unknown[],
  options: { before?: string; onlyIf?: string } = {},
): [string, unknown[]] {
  const all = [...parameters];
  const tables = options.before ? [options.before] : [];
  for (const write of writes) {
    tables.push(`${write.name} AS (${carriedInsert(write, all.length + 1, options.onlyIf)})`);
    all.push(...carriedParameters(write));
  }
  return tables.length ? [`WITH ${tables.join(',\n')}\n${statement}`, all] : [statement, all];
}
