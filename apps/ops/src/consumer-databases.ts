import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { DataSource, EntityManager } from 'typeorm';
import { declaredRetentions, DeclaredRetention } from '@app/inbox';
import { postgresOptions } from '@app/platform';
import { CliError, ExitCode } from './cli-error';
import { OpsConfig } from './config';

/** A consumer's database as ops sees it: the apps that own an inbox there, and a connection. */
export interface ConsumerDatabase {
  /** The app whose database this is (`fulfillment`, `notifier`); consumer names come from its inbox_consumers. */
  name: string;
  manager: EntityManager;
}

/** A consumer registered in a consumer database's `inbox_consumers`, with the retention it declared. */
export interface RegisteredConsumer extends DeclaredRetention {
  database: ConsumerDatabase;
}

/**
 * The consumer databases (one per consuming app), connected on first use and closed at exit.
 * Ops never writes a consumer's effects; it reads inbox, dead letters and declared retention,
 * and sweeps or re-drives through the same tables the consumer uses.
 */
@Injectable()
export class ConsumerDatabases implements OnApplicationShutdown {
  private readonly urls: Record<string, string>;
  private readonly connected = new Map<string, DataSource>();

  constructor(config: ConfigService<OpsConfig, true>) {
    this.urls = {
      fulfillment: config.get('FULFILLMENT_DATABASE_URL', { infer: true }),
      notifier: config.get('NOTIFIER_DATABASE_URL', { infer: true }),
    };
  }

  names(): string[] {
    return Object.keys(this.urls);
  }

  /** One database by app name; a clear refusal for an unknown name. */
  async get(name: string): Promise<ConsumerDatabase> {
    const url = this.urls[name];
    if (!url) throw new CliError(`unknown consumer database "${name}" (known: ${this.names().join(', ')})`, 2);
    let dataSource = this.connected.get(name);
    if (!dataSource) {
      dataSource = new DataSource(postgresOptions({ url, applicationName: 'ops', poolSize: 2, entities: [] }));
      try {
        await dataSource.initialize();
      } catch (error) {
        throw new CliError(`cannot reach the ${name} database: ${(error as Error).message}`);
      }
      this.connected.set(name, dataSource);
    }
    return { name, manager: dataSource.manager };
  }

  async all(): Promise<ConsumerDatabase[]> {
    const databases: ConsumerDatabase[] = [];
    for (const name of this.names()) databases.push(await this.get(name));
    return databases;
  }

  /** Every consumer registered in any consumer database (each consumer declares itself at start). */
  async consumers(): Promise<RegisteredConsumer[]> {
    const consumers: RegisteredConsumer[] = [];
    for (const database of await this.all()) {
      for (const declared of await declaredRetentions(database.manager)) consumers.push({ ...declared, database });
    }
    return consumers;
  }

  /** `consumers()`, or only the one named; an unknown name is bad usage, refused naming the known ones. */
  async selectConsumers(name?: string): Promise<RegisteredConsumer[]> {
    const consumers = await this.consumers();
    if (name === undefined) return consumers;
    const selected = consumers.filter((registered) => registered.consumer === name);
    if (!selected.length) {
      const known = consumers.map((registered) => registered.consumer).join(', ') || 'none registered yet';
      throw new CliError(`unknown consumer "${name}" (known: ${known})`, ExitCode.usage);
    }
    return selected;
  }

  async onApplicationShutdown(): Promise<void> {
    await Promise.all([...this.connected.values()].map((dataSource) => dataSource.destroy()));
  }
}
