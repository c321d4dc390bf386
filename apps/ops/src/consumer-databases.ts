import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { DataSource, EntityManager } from 'typeorm';
import { postgresOptions } from '@app/platform';
import { CliError } from './cli-error';
import { OpsConfig } from './config';

/** A consumer's database as ops sees it: the apps that own an inbox there, and a connection. */
export interface ConsumerDatabase {
  /** The app whose database this is (`fulfillment`, `notifier`); consumer names come from its inbox_consumers. */
  name: string;
  manager: EntityManager;
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

  async onApplicationShutdown(): Promise<void> {
    await Promise.all([...this.connected.values()].map((dataSource) => dataSource.destroy()));
  }
}
