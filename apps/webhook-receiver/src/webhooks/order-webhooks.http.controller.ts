import { Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import { ApiHeader, ApiNoContentResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { WebhookHeaders } from '@app/contracts';
import { logOnCompletion } from '@app/platform';
import { readRawBody } from './raw-body';
import { parseOrderWebhook } from './order-webhook.schema';
import { ReceiveOrderWebhookService } from './receive-order-webhook.service';
import { webhookProblem } from './webhook-problems';
import { WebhookVerifier } from './webhook-verifier';

/** Set on the 204 for a webhook-id already stored: acknowledged, nothing changed. */
export const DUPLICATE_HEADER = 'Idempotent-Replayed';

@ApiTags('webhooks')
@Controller('webhooks')
export class OrderWebhooksHttpController {
  constructor(
    private readonly verifier: WebhookVerifier,
    private readonly service: ReceiveOrderWebhookService,
  ) {}

  @Post('orders')
  @HttpCode(204)
  @ApiOperation({
    operationId: 'webhooks.orders.receive',
    summary: 'Receives an order webhook (Standard Webhooks): verified, then stored once per webhook-id',
  })
  @ApiHeader({ name: WebhookHeaders.id, required: true, description: 'The event id, the same on every retry' })
  @ApiHeader({ name: WebhookHeaders.timestamp, required: true, description: 'Unix seconds; refused beyond 5 minutes either way' })
  @ApiHeader({ name: WebhookHeaders.signature, required: true, description: 'Space-separated `v1,<base64 HMAC-SHA256>`' })
  @ApiNoContentResponse({
    description: `Stored, or already stored (then \`${DUPLICATE_HEADER}: true\`), or of a type this receiver does not handle: do not send it again.`,
  })
  @ApiResponse({ status: 400, description: 'Signed, but not a webhook body, or a known type with wrong fields. Nothing stored.' })
  @ApiResponse({ status: 401, description: 'Missing or wrong signature, or timestamp outside the tolerance. Nothing stored.' })
  @ApiResponse({ status: 413, description: 'Body over 64 KiB. Nothing stored.' })
  @ApiResponse({ status: 503, description: 'The database did not answer: retry (Retry-After).' })
  async receive(@Req() request: Request, @Res({ passthrough: true }) response: Response): Promise<void> {
    const rawBody = await readRawBody(request, response);
    const delivery = this.verifier.verify(rawBody, request.headers); // 401 unless signed by the sender, recently
    logOnCompletion(response, { webhookId: delivery.webhookId });
    const parsed = parseOrderWebhook(rawBody);
    if ('problems' in parsed) throw webhookProblem('WEBHOOK.INVALID', parsed.problems.join('; '), { errors: parsed.problems });
    if ('unhandledType' in parsed) {
      // Forward compatible, like the service's own consumers: a new event type is not an error to retry or dead-letter.
      logOnCompletion(response, { webhookOutcome: 'ignored', webhookType: parsed.unhandledType });
      return;
    }
    const outcome = await this.service.receive(delivery, parsed.webhook);
    logOnCompletion(response, { webhookOutcome: outcome, tenant: parsed.webhook.data.tenantId });
    if (outcome === 'duplicate') response.setHeader(DUPLICATE_HEADER, 'true');
  }
}
