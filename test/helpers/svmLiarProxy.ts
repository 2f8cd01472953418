// A loopback JSON-RPC proxy in front of the devnet's SVM RPC that stands for a provider that lies:
// it forwards every call to the honest RPC, then lets the test rewrite the answer of the calls it
// chooses (`lie`), e.g. "this signature has no status" for a payout that landed, or a transaction
// and a signature that do not exist. Its `context.slot` stays current: a pinned read cannot tell it
// from an honest provider.
import { JsonRpcProxy, type RpcCall } from './jsonRpcProxy.ts';

/** One JSON-RPC call as the proxy received it. */
export interface LiarCall {
  method: string;
  params: unknown[];
}

/** Rewrites an honest answer's result (return it unchanged to tell the truth); `honest` asks the real RPC anything. */
export type Lie = (call: LiarCall, result: any, honest: (method: string, params: unknown[]) => Promise<any>) => Promise<any> | any;

export class SvmLiarProxy extends JsonRpcProxy {
  #lie: Lie | undefined;
  #swallow = new Set<string>();
  /** Answers rewritten by `lie` (the result changed), per method. */
  readonly lied: Record<string, number> = {};

  /**
   * From now on answers go through `lie` (undefined: the proxy tells the truth again). Calls of the
   * `swallow` methods (e.g. sendTransaction) never reach the RPC: they are refused.
   */
  lying(lie: Lie | undefined, swallow: string[] = []): void {
    this.#lie = lie;
    this.#swallow = new Set(swallow);
  }

  protected async answer(c: RpcCall): Promise<unknown> {
    const head = { jsonrpc: '2.0', id: c.id };
    const params = c.params ?? [];
    if (this.#swallow.has(c.method)) {
      this.lied[c.method] = (this.lied[c.method] ?? 0) + 1;
      return { ...head, error: { code: -32005, message: 'Node is unhealthy' } };
    }
    const a = await this.forward(c.method, params);
    const lie = this.#lie;
    if (!lie || !('result' in a)) return { ...a, ...head };
    const result = await lie({ method: c.method, params }, a.result, async (m, p) => (await this.forward(m, p)).result);
    if (JSON.stringify(result) !== JSON.stringify(a.result)) this.lied[c.method] = (this.lied[c.method] ?? 0) + 1;
    return { ...head, result };
  }
}
