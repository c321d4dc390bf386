import { Module } from '@nestjs/common';
import { validatedConfig } from '@app/platform';
import { AuditCommand } from './audit/audit.command';
import { ClientsCreateCommand } from './clients/clients-create.command';
import { ClientsListCommand } from './clients/clients-list.command';
import { ClientsRevokeCommand } from './clients/clients-revoke.command';
import { opsConfig } from './config';
import { ConsumerDatabases } from './consumer-databases';
import { MigrateCommand } from './db/migrate.command';
import { DlqListCommand } from './dlq/dlq-list.command';
import { DeadLetterRedriveService } from './dlq/dead-letter-redrive.service';
import { DlqRedriveCommand } from './dlq/dlq-redrive.command';
import { InboxSweepCommand } from './inbox/inbox-sweep.command';
import { KafkaProducer } from './kafka-producer';
import { OrdersDatabaseModule } from './orders-database.module';
import { OutboxCleanupCommand } from './outbox/outbox-cleanup.command';
import { OutboxReplayCommand } from './outbox/outbox-replay.command';
import { OutboxReplayService } from './outbox/outbox-replay.service';
import { OutboxStatusCommand } from './outbox/outbox-status.command';
import { ReceiptsSweepCommand } from './receipts/receipts-sweep.command';
import { WebhooksDeadLetterCommand } from './webhooks/webhooks-dead-letter.command';
import { WebhooksListCommand } from './webhooks/webhooks-list.command';
import { WebhooksRetryCommand } from './webhooks/webhooks-retry.command';

@Module({
  imports: [validatedConfig(opsConfig), OrdersDatabaseModule],
  providers: [
    ConsumerDatabases,
    KafkaProducer,
    MigrateCommand,
    ClientsCreateCommand,
    ClientsListCommand,
    ClientsRevokeCommand,
    ReceiptsSweepCommand,
    OutboxStatusCommand,
    OutboxCleanupCommand,
    OutboxReplayCommand,
    OutboxReplayService,
    InboxSweepCommand,
    DlqListCommand,
    DlqRedriveCommand,
    DeadLetterRedriveService,
    AuditCommand,
    WebhooksListCommand,
    WebhooksRetryCommand,
    WebhooksDeadLetterCommand,
  ],
})
export class OpsModule {}
