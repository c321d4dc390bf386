/**
 * A write that rides in another statement as a data-modifying CTE (`WITH <name> AS (<sql>) <statement>`),
 * so that both take one round trip and succeed or fail together. Its parameters are numbered from the
 * carrying statement's next free one.
 */
export interface CarriedWrite {
  name: string;
  sql(firstParameter: number): string;
  parameters: unknown[];
}

/**
 * `statement` (parameters $1..$n) carrying `writes` (each numbered on from the parameters before it):
 * the SQL text and all parameters. The writes' names must differ.
 */
export function carrying(writes: readonly CarriedWrite[], statement: string, parameters: unknown[]): [string, unknown[]] {
  if (!writes.length) return [statement, parameters];
  const all = [...parameters];
  const tables = writes.map((write) => {
    const table = `${write.name} AS (${write.sql(all.length + 1)})`;
    all.push(...write.parameters);
    return table;
  });
  return [`WITH ${tables.join(',\n')}\n${statement}`, all];
}
