import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import express, { Request, Response } from 'express';
import { firstUnacceptableText, MAX_JSON_DEPTH, nestsDeeperThan, TEXT_RULE } from './body-rules';
import { problemException } from './problem-catalog';

export const MAX_BODY_BYTES = 16 * 1024;

class TooDeep extends Error {}

const parseJson = express.json({
  limit: MAX_BODY_BYTES,
  // Any JSON value parses; the guard then says when it is not an object (strict mode would call `null` "not JSON").
  strict: false,
  type: () => true,
  // Runs on the raw bytes before JSON.parse: depth is bounded before anything recurses over it.
  verify: (_req, _res, raw) => {
    if (nestsDeeperThan(raw, MAX_JSON_DEPTH)) throw new TooDeep();
  },
});

/**
 * Parses the JSON body only now — after ApiKeyGuard authenticated and authorised the caller — so an
 * anonymous caller learns nothing from how its body is judged. A guard, placed after ApiKeyGuard,
 * rather than an interceptor: the order is the same, and a route without interceptors skips Nest's
 * observable pipeline (~4 % of the command path's CPU). 415 unless JSON (in UTF-8, with a Content-Encoding
 * body-parser inflates), 413 over 16 KiB, 400 for malformed JSON or a body its Content-Encoding does not
 * decode, anything but an object, nesting deeper than MAX_JSON_DEPTH, or a string (value or field name)
 * that breaks TEXT_RULE.
 */
@Injectable()
export class JsonBodyGuard implements CanActivate {
  async canActivate(context: ExecutionContext): Promise<boolean> {
    const http = context.switchToHttp();
    const request = http.getRequest<Request>();
    const contentType = request.headers['content-type'] ?? '';
    if (!/^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i.test(contentType)) {
      throw problemException('REQUEST.UNSUPPORTED_MEDIA_TYPE', 'Send the command as Content-Type: application/json.');
    }
    await new Promise<void>((resolve, reject) =>
      parseJson(request, http.getResponse<Response>(), (error?: unknown) => (error ? reject(bodyProblem(error, request)) : resolve())),
    );
    if (typeof request.body !== 'object' || request.body === null || Array.isArray(request.body)) {
      throw problemException('REQUEST.INVALID', 'The body must be a JSON object.');
    }
    const field = firstUnacceptableText(request.body);
    if (field) {
      const message = `${JSON.stringify(field)}: ${TEXT_RULE}`;
      throw problemException('REQUEST.INVALID', message, { errors: [{ field, message }] });
    }
    return true;
  }
}

function bodyProblem(error: unknown, request: Request) {
  if (error instanceof TooDeep || (error as { originalError?: unknown }).originalError instanceof TooDeep) {
    return problemException('REQUEST.INVALID', `The body must not nest arrays and objects deeper than ${MAX_JSON_DEPTH} levels.`);
  }
  const type = (error as { type?: string }).type;
  if (type === 'entity.too.large') {
    return problemException('REQUEST.TOO_LARGE', `The body must not exceed ${MAX_BODY_BYTES} bytes.`);
  }
  if (type === 'charset.unsupported') {
    const charset = (error as { charset?: string }).charset ?? '';
    return problemException('REQUEST.UNSUPPORTED_MEDIA_TYPE', `Charset "${charset}" is not supported: send JSON in UTF-8.`);
  }
  if (type === 'encoding.unsupported') {
    const encoding = (error as { encoding?: string }).encoding ?? '';
    return problemException(
      'REQUEST.UNSUPPORTED_MEDIA_TYPE',
      `Content-Encoding "${encoding}" is not supported: send the body as it is, or with gzip, deflate or br.`,
    );
  }
  // zlib's codes: the body is not what its Content-Encoding says it is.
  if (String((error as { code?: unknown }).code).startsWith('Z_')) {
    const encoding = request.headers['content-encoding'];
    return problemException('REQUEST.INVALID', `The body does not decode as its Content-Encoding ${encoding} says it is encoded.`);
  }
  if (type === 'request.aborted') {
    return problemException('REQUEST.INVALID', 'The client closed the connection before the body arrived.');
  }
  return problemException('REQUEST.INVALID', 'The body is not valid JSON.');
}
