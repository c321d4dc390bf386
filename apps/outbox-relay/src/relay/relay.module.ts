import { Module } from '@nestjs/common';
import { KafkaPublisher } from './kafka-publisher';
import { OutboxRelay } from './outbox-relay.service';
import { RelayMetrics } from './relay-metrics';

@Module({ providers: [KafkaPublisher, RelayMetrics, OutboxRelay] })
export class RelayModule {}
