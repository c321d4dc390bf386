import { Controller, Get, Param, UseGuards } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { Operations } from '@app/contracts';
import { queryRows, retryOnLostSession } from '@app/platform';
import { ApiKeyGuard, RequiresOperation } from '../../auth/api-key.guard';
import type { AuthenticatedClient } from '../../auth/api-client-cache';
import { CurrentClient } from '../../auth/current-client.decorator';
import { ApiAuthenticatedResponses, ProblemDoc } from '../../http/api-docs';
import { ApiOrderIdParam, orderIdPipe } from '../../http/order-id.pipe';
import { problemException } from '../../http/problem-catalog';
import { ORDER_COLUMNS, OrderResponse, OrderRow, toOrderResponse } from '../order.response';

@ApiTags('orders')
@Controller('v1/orders')
@UseGuards(ApiKeyGuard)
export class GetOrderHttpController {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  @Get(':id')
  @RequiresOperation(Operations.readOrders)
  @ApiOperation({ operationId: Operations.readOrders, summary: "Read one of your tenant's orders" })
  @ApiOrderIdParam()
  @ApiOkResponse({ type: OrderResponse, description: 'The order, as it is now.' })
  @ApiResponse({ status: 400, type: ProblemDoc, description: 'The id is not a UUID.' })
  @ApiResponse({ status: 404, type: ProblemDoc, description: "Unknown order, or another tenant's." })
  @ApiAuthenticatedResponses()
  async get(@CurrentClient() client: AuthenticatedClient, @Param('id', orderIdPipe) id: string): Promise<OrderResponse> {
    const { rows } = await retryOnLostSession(() =>
      queryRows<OrderRow>(this.dataSource.manager, /* sql */ `SELECT ${ORDER_COLUMNS} FROM orders WHERE id = $1 AND tenant_id = $2`, [
        id,
        client.tenantId,
      ]),
    );
    if (!rows[0]) throw problemException('ORDER.NOT_FOUND', `No order ${id}.`);
    return toOrderResponse(rows[0]);
  }
}
