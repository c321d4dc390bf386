import express, { Request, Response } from 'express';
import { webhookProblem } from './webhook-problems';

/** Order webhooks are a few hundred bytes; this leaves room for fields added later. */
export const MAX_BODY_BYTES = 64 * 1024;

const readRaw = express.raw({ type: () => true, limit: MAX_BODY_BYTES });

/**
 * The exact bytes of the body, whatever the Content-Type: the signature covers these bytes, so the body
 * must not be parsed (and re-serialised) before it is verified. 413 over MAX_BODY_BYTES.
 */
export async function readRawBody(request: Request, response: Response): Promise<Buffer> {
  await new Promise<void>((resolve, reject) =>
    readRaw(request, response, (error?: unknown) => (error ? reject(bodyProblem(error)) : resolve())),
  );
  return Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
}

function bodyProblem(error: unknown) {
  const type = (error as { type?: string }).type;
  if (type === 'entity.too.large') return webhookProblem('REQUEST.TOO_LARGE', `The body must not exceed ${MAX_BODY_BYTES} bytes.`);
  if (type === 'encoding.unsupported') return webhookProblem('REQUEST.UNSUPPORTED_ENCODING', (error as Error).message);
  return webhookProblem('REQUEST.INVALID', 'The body could not be read.');
}
