import { CommandRunner, Help, Option } from 'nest-commander';
import { CliError, ExitCode } from './cli-error';
import { print } from './output';

/** The option every ops command takes. */
export interface OutputOptions {
  json?: boolean;
}

/**
 * What every ops command shares, so a command is its options, a call to the service that does the
 * work, and the rendering of its result:
 * - `--json`: exactly one JSON line on stdout (`jsonShape` names its fields in --help), else text for people;
 * - exit codes (cli-error.ts): 0 done, 1 refused or failed (throw `CliError`), 2 bad usage
 *   (`CliError(…, ExitCode.usage)`, as `usage()` throws); main.ts turns a throw into one stderr line.
 */
export abstract class OpsCommand<O extends OutputOptions = OutputOptions> extends CommandRunner {
  /** The fields of the `--json` line, for --help (docs/operator-cli.md has them too). */
  protected abstract readonly jsonShape: string;

  abstract override run(args: string[], options: O): Promise<void>;

  /** Prints the result: `value` as one JSON line with --json, else the text `text()` builds. */
  protected report(options: O, value: unknown, text: () => string): void {
    print(options.json, value, text);
  }

  /** Bad usage: exit 2 with `message`, before anything is read or changed. */
  protected usage(message: string): never {
    throw new CliError(message, ExitCode.usage);
  }

  @Option({ flags: '--json', description: 'print the result as one JSON line (its fields: below)' })
  parseJson(): boolean {
    return true;
  }

  @Help('after')
  jsonHelp(): string {
    return `\n--json prints one line: ${this.jsonShape}`;
  }
}
