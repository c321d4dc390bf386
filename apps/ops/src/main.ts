import { Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { CommandFactory, InjectCommander } from 'nest-commander';
import { Command, CommanderError } from 'commander';
import { configOrExit } from '@app/platform';
import { CliError, ExitCode } from './cli-error';
import { opsConfig } from './config';
import { OpsModule } from './ops.module';

function fail(error: Error): never {
  if (error instanceof CommanderError) {
    // commander has already printed its own message (or the help text).
    process.exit(error.exitCode === 0 ? ExitCode.ok : ExitCode.usage);
  }
  process.stderr.write(`ops: ${error.message}\n`);
  process.exit(error instanceof CliError ? error.exitCode : ExitCode.failed);
}

/**
 * What nest-commander leaves undone: its `cliName` never reaches commander, which names the program
 * after this file ("Usage: main"), and its error handler is set on the program only, so a command's
 * own usage errors (an unknown option) would exit 1 straight from commander instead of 2. And commander
 * drops arguments a command does not declare: `clients:revoke A B` would revoke A alone and succeed.
 */
@Injectable()
class CommanderSetup implements OnApplicationBootstrap {
  constructor(@InjectCommander() private readonly program: Command) {}

  onApplicationBootstrap(): void {
    this.program.name('npm run ops --');
    for (const command of this.program.commands) command.exitOverride(fail).allowExcessArguments(false);
  }
}

async function main(): Promise<void> {
  configOrExit('ops', opsConfig);
  await CommandFactory.run(
    { module: OpsModule, providers: [CommanderSetup] },
    { logger: ['error', 'warn'], errorHandler: fail, serviceErrorHandler: fail },
  );
}

main().catch(fail);
