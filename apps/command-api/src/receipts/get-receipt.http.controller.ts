import { Controller, Get, Param, Res, UseGuards } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Response } from 'express';
import { DataSource } from 'typeorm';
import { idempotentOperations, Operation } from '@app/contracts';
import { findReceipt, isValidIdempotencyKey } from '@app/idempotency';
import { logOnCompletion, retryOnLostSession } from '@app/platform';
import { ApiKeyGuard, authorise } from '../auth/api-key.guard';
import type { AuthenticatedClient } from '../auth/api-client-cache';
import { CurrentClient } from '../auth/current-client.decorator';
import { ApiAuthenticatedResponses, ProblemDoc } from '../http/api-docs';
import { problemException } from '../http/problem-catalog';
import { ReceiptResponse } from './receipt.response';

const READ_RECEIPT = 'idempotency-receipts.read';

@ApiTags('idempotency')
@Controller('v1/idempotency-receipts')
@UseGuards(ApiKeyGuard)
export class GetReceiptHttpController {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  @Get(':operation/:key')
  @ApiOperation({
    operationId: READ_RECEIPT,
    summary: 'What the service remembers for (your tenant, operation, key)',
    description:
      'Lets a client that lost a reply learn the outcome without resending. A request still in flight is ' +
      'not visible until it commits. Requires permission for the operation.',
  })
  @ApiParam({ name: 'operation', enum: idempotentOperations })
  @ApiOkResponse({ type: ReceiptResponse, description: 'The receipt: what the key did, until when it is remembered, and in which region.' })
  @ApiResponse({ status: 404, type: ProblemDoc, description: 'Nothing remembered for this scope (never used, or swept).' })
  @ApiResponse({ status: 400, type: ProblemDoc, description: 'Unknown operation or malformed key.' })
  @ApiAuthenticatedResponses()
  async get(
    @CurrentClient() client: AuthenticatedClient,
    @Param('operation') operation: string,
    @Param('key') key: string,
    @Res({ passthrough: true }) res: Response,
  ): Promise<ReceiptResponse> {
    logOnCompletion(res, { operation: READ_RECEIPT });
    if (!(idempotentOperations as readonly string[]).includes(operation)) {
      throw problemException('REQUEST.INVALID', `Unknown operation ${JSON.stringify(operation)}.`);
    }
    authorise(client, operation as Operation);
    if (!isValidIdempotencyKey(key)) throw problemException('REQUEST.INVALID', 'Malformed idempotency key.');
    const receipt = await retryOnLostSession(() => findReceipt(this.dataSource.manager, { tenantId: client.tenantId, operation, key }));
    if (!receipt) throw problemException('RECEIPT.NOT_FOUND', `No receipt for ${operation} with this key.`);
    return receipt;
  }
}
