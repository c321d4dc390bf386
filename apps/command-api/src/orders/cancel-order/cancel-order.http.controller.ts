import { Body, Controller, HttpCode, Param, Post, Req, Res, UseGuards } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
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
import { ApiOrderIdParam, orderIdPipe } from '../../http/order-id.pipe';
import { strictBody } from '../../http/validation.pipe';
import { commandContext } from '../command-context';
import { OrderResponse } from '../order.response';
import { cancelOrderRequest, CancelOrderRequest } from './cancel-order.request.dto';
import { CancelOrderService } from './cancel-order.service';

@ApiTags('orders')
@Controller('v1/orders')
@UseGuards(ApiKeyGuard)
export class CancelOrderHttpController {
  private readonly faultInjection: boolean;

  constructor(
    private readonly service: CancelOrderService,
    config: ConfigService<CommandApiConfig, true>,
  ) {
    this.faultInjection = config.get('FAULT_INJECTION', { infer: true });
  }

  @Post(':id/cancel')
  @HttpCode(200)
  @RequiresOperation(Operations.cancelOrder)
  @UseGuards(JsonBodyGuard) // after the controller's ApiKeyGuard: authenticated callers only
  @ApiOperation({ operationId: Operations.cancelOrder, summary: 'Cancel an order, once per Idempotency-Key' })
  @ApiOrderIdParam()
  @ApiIdempotencyKeyHeader()
  @ApiOkResponse({ type: OrderResponse, description: 'The cancelled order.', headers: idempotencyHeaders })
  @ApiResponse({
    status: 404,
    type: ProblemDoc,
    description: "Unknown order, or another tenant's (stored and replayed).",
    headers: idempotencyHeaders,
  })
  @ApiResponse({
    status: 409,
    type: ProblemDoc,
    description:
      'Already cancelled (stored and replayed; the `order` itself only for clients allowed orders.read), or a request with this key is in progress.',
    // Retry-After comes with "in progress", the idempotency headers with the stored outcome.
    headers: { ...retryAfter, ...idempotencyHeaders },
  })
  @ApiCommandResponses()
  cancel(
    @CurrentClient() client: AuthenticatedClient,
    @IdempotencyKey() key: string,
    @Param('id', orderIdPipe) orderId: string,
    @Body(strictBody(cancelOrderRequest)) body: CancelOrderRequest,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Promise<unknown> {
    return respondIdempotently(res, client, Operations.cancelOrder, () =>
      this.service.execute(client.tenantId, key, orderId, body.reason, commandContext(req, this.faultInjection)),
    );
  }
}
