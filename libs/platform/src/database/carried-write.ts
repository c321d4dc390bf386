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
  return pushRows([], write);
}

/**
 * `statement` (parameters $1..$n) carrying `writes` (each numbered on from the parameters before it):
 * the SQL text and all parameters. `before`: CTEs the statement and the writes may read, written first
 * (their parameters among the statement's); `onlyIf`: a condition on them every write is made to wait for.
 *
 * The same statement, options and shapes of writes (names, tables, column lists, row counts) give the
 * same string object: the command path sends a few such shapes, and a text built anew for each command
 * cost ~10 µs here to build and then to find among the prepared statements (queryRows, pg) by its
 * ~1.5 KB; built once, it costs ~1.6 µs, the parameters included.
 */
export function carrying(
  writes: readonly CarriedWrite[],
  statement: string,
  parameters: unknown[],
  options: { before?: string; onlyIf?: string } = {},
): [string, unknown[]] {
  const all = [...parameters];
  for (const write of writes) pushRows(all, write);
  if (!writes.length && !options.before) return [statement, all];
  const shape = shapeOf(writes, statement, parameters.length, options);
  let text = shape === undefined ? undefined : texts.get(shape);
  if (text === undefined) {
    text = carryingText(writes, statement, parameters.length, options);
    if (shape !== undefined && texts.size < MAX_SHAPES) texts.set(shape, text);
  }
  return [text, all];
}

function carryingText(
  writes: readonly CarriedWrite[],
  statement: string,
  parameters: number,
  options: { before?: string; onlyIf?: string },
): string {
  const tables = options.before ? [options.before] : [];
  let next = parameters + 1;
  for (const write of writes) {
    tables.push(`${write.name} AS (${carriedInsert(write, next, options.onlyIf)})`);
    next += write.rows.length * write.columns.length;
  }
  return `WITH ${tables.join(',\n')}\n${statement}`;
}

function pushRows(parameters: unknown[], write: CarriedWrite): unknown[] {
  for (const row of write.rows) for (const value of row) parameters.push(value);
  return parameters;
}

/** Texts by shape, and ids of the parts shapes are made of; each bounded (past it, texts are built each time). */
const MAX_SHAPES = 500;
const texts = new Map<string, string>();
const partIds = new Map<unknown, number>();

/** A key for what the text is built from, made of the parts' ids; undefined once there are too many parts to remember. */
function shapeOf(
  writes: readonly CarriedWrite[],
  statement: string,
  parameters: number,
  options: { before?: string; onlyIf?: string },
): string | undefined {
  const parts: unknown[] = [statement, options.before, options.onlyIf];
  for (const write of writes) parts.push(write.name, write.table, write.columns);
  let shape = `${parameters}`;
  for (const part of parts) {
    let id = partIds.get(part);
    if (id === undefined) {
      if (partIds.size >= MAX_SHAPES) return undefined;
      partIds.set(part, (id = partIds.size));
    }
    shape += ` ${id}`;
  }
  for (const write of writes) shape += ` ${write.rows.length}`;
  return shape;
}
