// A loopback JSON-RPC proxy in front of the devnet's SVM RPC that can stand for a load-balanced
// provider one of whose backends lags: while `lagAt(slot)` is on, the methods named in `methods`
// are answered by a backend stuck at that slot (as a real one would answer): a `minContextSlot`
// past it is refused (-32016), `context.slot` says the old slot, signatures and transactions that
// landed after it do not exist yet. Every other method is answered by the current backend.
import { JsonRpcProxy, type RpcCall } from './jsonRpcProxy.ts';

export class SvmLagProxy extends JsonRpcProxy {
  #at: number | undefined;
  #methods = new Set<string>();
  /** Answers given by the lagging backend (counted per method). */
  readonly lagged: Record<string, number> = {};

  #values: Record<string, unknown> = {};

  /**
   * From now on `methods` are answered by a backend stuck at `slot`; `values` are what it holds
   * there for value reads (e.g. getBalance: the lamports at that slot).
   */
  lagAt(slot: number, methods: string[], values: Record<string, unknown> = {}): void {
    this.#at = slot;
    this.#methods = new Set(methods);
    this.#values = values;
  }

  /** The lagging backend catches up. */
  catchUp(): void {
    this.#at = undefined;
  }

  protected async answer(c: RpcCall): Promise<unknown> {
    const at = this.#at;
    const head = { jsonrpc: '2.0', id: c.id };
    if (at === undefined || !this.#methods.has(c.method)) return { ...(await this.forward(c.method, c.params)), ...head };
    this.lagged[c.method] = (this.lagged[c.method] ?? 0) + 1;
    const min = (c.params ?? [])
      .map((p) => (p && typeof p === 'object' ? (p as { minContextSlot?: unknown }).minContextSlot : undefined))
      .find((m) => typeof m === 'number') as number | undefined;
    if (min !== undefined && min > at)
      return { ...head, error: { code: -32016, message: 'Minimum context slot has not been reached', data: { contextSlot: at } } };
    const a = await this.forward(c.method, c.params);
    if (!('result' in a) || a.result === null) return { ...a, ...head };
    let result = a.result;
    if (c.method in this.#values && result && typeof result === 'object' && 'value' in result) result = { ...result, value: this.#values[c.method] };
    switch (c.method) {
      case 'getSlot':
      case 'getBlockHeight':
        result = Math.min(result, at);
        break;
      case 'getTransaction':
        if (result.slot > at) result = null;
        break;
      case 'getSignaturesForAddress':
        result = result.filter((s: { slot: number }) => s.slot <= at);
        break;
      case 'getSignatureStatuses':
        result = { ...result, value: result.value.map((s: { slot: number } | null) => (s && s.slot <= at ? s : null)) };
        break;
    }
    if (result && typeof result === 'object' && 'context' in result)
      result = { ...result, context: { ...result.context, slot: Math.min(result.context.slot, at) } };
    return { ...head, result };
  }
}
