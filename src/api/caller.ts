import type { FastifyRequest } from 'fastify';
import { ApiError } from './errors.ts';

/** Who is calling, as the API-key hook resolved it (undefined without a key). */
export interface ApiCaller {
  id: string;
  name: string | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    apiCaller?: ApiCaller;
  }
}

export function requireCaller(req: FastifyRequest): ApiCaller {
  if (!req.apiCaller) throw new ApiError(401, 'MISSING_API_KEY', 'this endpoint needs an API key: send it as x-api-key');
  return req.apiCaller;
}
