import { CommandFactory } from 'nest-commander';
import { CommanderError } from 'commander';
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

async function main(): Promise<void> {
  configOrExit('ops', opsConfig);
  await CommandFactory.run(OpsModule, {
    cliName: 'npm run ops --',
    logger: ['error', 'warn'],
    errorHandler: fail,
    serviceErrorHandler: fail,
  });
}

main().catch(fail);
