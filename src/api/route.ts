import type { FastifyRequest } from 'fastify';

/**
 * The path pattern of the route a request matched (`/quote`, `/app-fees/:wallet/claim`), or
 * undefined when none did (a 404). Checks that single out paths key on this, never on `req.url`:
 * the router decodes percent-encoding before it matches, so `/qu%6Fte` runs `/quote`, and a check
 * on the raw URL would let every other spelling of a path past it.
 */
export function matchedRoute(req: FastifyRequest): string | undefined {
  return req.routeOptions.url;
}
