import { Body, Controller, Post, Req, Res, UseGuards } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { ApiCreatedResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { Operations } from '@app/contracts';
import { ApiKeyGuard, RequiresOperation } from '../../auth/api-key.guard';
import type { AuthenticatedClient } from '../../auth/api-client-cache';
import { CurrentClient } from '../../auth/current-client.decorator';
import { CommandApiConfig } from '../../config';
import { ApiCommandResponses, idempotencyHeaders, ProblemDoc, retryAfter } from '../../http/api-docs';
import { ApiIdempotencyKeyHeader, IdempotencyKey } from '../../http/idempotency-key.decorator';
import { respondIdempotently } from '../../http/idempotent-response';
import { JsonBodyGuard } from '../../http/json-body.guard';
import { strictBody } from '../../http/validation.pipe';
import { commandContext } from '../command-context';
import { OrderResponse } from '../order.response';
import { createOrderRequest, CreateOrderRequest } from './create-order.request.dto';
import { CreateOrderService } from './create-order.service';

@ApiTags('orders')
@Controller('v1/orders')
@UseGuards(ApiKeyGuard)
export class CreateOrderHttpController {
  private readonly faultInjection: boolean;

  constructor(
    private readonly service: CreateOrderService,
    config: ConfigService<CommandApiConfig, true>,
  ) {
    this.faultInjection = config.get('FAULT_INJECTION', { infer: true });
  }

  @Post()
  @RequiresOperation(Operations.createOrder)
  @UseGuards(JsonBodyGuard) // after the controller's ApiKeyGuard: authenticated callers only
  @ApiOperation({ operationId: Operations.createOrder, summary: 'Place an order, once per Idempotency-Key' })
  @ApiIdempotencyKeyHeader()
  @ApiCreatedResponse({
    type: OrderResponse,
    description: 'The order was placed (or this is the replay of the request that placed it).',
    headers: { Location: { description: '/v1/orders/{id}', schema: { type: 'string' } }, ...idempotencyHeaders },
  })
  @ApiResponse({
    status: 409,
    type: ProblemDoc,
    description:
      'customerRef already names an order of this tenant (`/problems/customer-ref-already-used`, stored and replayed; ' +
      '`orderId` names it for clients allowed orders.read only).',
    // Retry-After comes with "in progress", the idempotency headers with the stored outcome.
    headers: { ...retryAfter, ...idempotencyHeaders },
  })
  @ApiCommandResponses()
  create(
    @CurrentClient() client: AuthenticatedClient,
    @IdempotencyKey() key: string,
    @Body(strictBody(createOrderRequest)) body: CreateOrderRequest,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Promise<unknown> {
    return respondIdempotently(res, client, Operations.createOrder, () =>
      this.service.execute(client.tenantId, key, body, commandContext(req, this.faultInjection)),
    );
  }
}
