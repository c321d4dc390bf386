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

/** `statement` (parameters $1..$n) carrying `write` (numbered from $n+1): the SQL text and all parameters. */
export function carrying(write: CarriedWrite | undefined, statement: string, parameters: unknown[]): [string, unknown[]] {
  if (!write) return [statement, parameters];
  return [`WITH ${write.name} AS (${write.sql(parameters.length + 1)})\n${statement}`, [...parameters, ...write.parameters]];
}
