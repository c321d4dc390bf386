import { DynamicModule } from '@nestjs/common';
import { ConfigModule } from '@nestjs/config';
import { z } from 'zod';
import { parseConfig } from './parse-config';

/** Global ConfigModule whose values were validated by `schema` before any provider runs. */
export function validatedConfig(schema: z.ZodType<Record<string, unknown>>): Promise<DynamicModule> {
  return ConfigModule.forRoot({
    isGlobal: true,
    ignoreEnvFile: true,
    cache: true,
    validate: (env) => parseConfig(schema, env),
  });
}
