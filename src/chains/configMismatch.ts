import { RelayNodeError } from '../lib/errors.ts';

/**
 * What a chain says disagrees with the node's config of it (a provider serving another chain, a token whose decimals
 * are not the configured ones): the node refuses to start, as it does on a bad config, rather than price or index
 * anything on it.
 */
export class ChainConfigMismatch extends RelayNodeError {
  override name = 'ChainConfigMismatch';
}
