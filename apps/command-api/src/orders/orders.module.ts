import { Module } from '@nestjs/common';
import { CancelOrderHttpController } from './cancel-order/cancel-order.http.controller';
import { CancelOrderService } from './cancel-order/cancel-order.service';
import { CommandRunner } from './command-runner';
import { CreateOrderHttpController } from './create-order/create-order.http.controller';
import { CreateOrderService } from './create-order/create-order.service';
import { GetOrderHttpController } from './get-order/get-order.http.controller';
import { IdempotencyPolicy } from './idempotency-policy';

@Module({
  controllers: [CreateOrderHttpController, CancelOrderHttpController, GetOrderHttpController],
  providers: [CommandRunner, CreateOrderService, CancelOrderService, IdempotencyPolicy],
})
export class OrdersModule {}
