// WebSocket pub/sub: signature, slot, account and logs subscriptions, notified after each transaction
// and each new slot.

import type http from 'node:http';
import crypto from 'node:crypto';
import type { Duplex } from 'node:stream';
import { errText } from '../../../lib/errors.ts';
import type { Accounts } from './accounts.ts';
import type { ChainState } from './chainState.ts';
import { type Cfg, FINALIZE_DEPTH, invalidParams, type Json, normCommitment, parsePubkey, RpcError } from './codec.ts';
import type { TxRecord } from './records.ts';
import { type Subscription, WsConn } from './wsConn.ts';

/** The WebSocket side: upgrades, subscriptions, and their notifications after a transaction or a new slot. */
export function createSubscriptions(chain: ChainState, accounts: Accounts) {
  const { records } = chain;
  const { getAcct, encodeAccount } = accounts;
  // ------------------------------------------------------------------ subscriptions

  const subs = new Map<number, Subscription>();
  let nextSubId = 1;
  const conns = new Set<WsConn>();

  function accountFingerprint(pubkey: string): string {
    const a = getAcct(pubkey);
    if (!a) return 'none';
    return `${a.lamports}:${a.owner}:${crypto.createHash('sha1').update(a.data).digest('hex')}`;
  }

  function notify(sub: Subscription, method: string, result: Json) {
    sub.conn.send({ jsonrpc: '2.0', method, params: { result, subscription: sub.id } });
  }

  function checkSignatureSubs() {
    for (const sub of subs.values()) {
      if (sub.kind !== 'signature') continue;
      const rec = records.get(sub.signature);
      if (rec && chain.visibleAt(rec, sub.commitment)) {
        subs.delete(sub.id);
        notify(sub, 'signatureNotification', { context: { slot: chain.slot }, value: { err: rec.err } });
      }
    }
  }

  function checkAccountSubs() {
    for (const sub of subs.values()) {
      if (sub.kind !== 'account') continue;
      const fp = accountFingerprint(sub.pubkey);
      if (fp === sub.last) continue;
      sub.last = fp;
      const a = getAcct(sub.pubkey);
      notify(sub, 'accountNotification', {
        context: { slot: chain.slot },
        value: a ? encodeAccount(sub.pubkey, a, sub.encoding) : null,
      });
    }
  }

  function afterTransaction(rec: TxRecord) {
    for (const sub of subs.values()) {
      if (sub.kind !== 'logs') continue;
      if (sub.mentions && !rec.tx.keys.includes(sub.mentions)) continue;
      notify(sub, 'logsNotification', {
        context: { slot: rec.slot },
        value: { signature: rec.tx.signature, err: rec.err, logs: rec.logs },
      });
    }
    checkSignatureSubs();
    checkAccountSubs();
  }

  // A new slot (the chain has advanced): slot subscribers hear of it; signatures and accounts are checked again.
  function onSlot() {
    const slot = chain.slot;
    if (subs.size) {
      for (const sub of subs.values()) {
        if (sub.kind === 'slot') notify(sub, 'slotNotification', { parent: slot - 1, root: Math.max(0, slot - FINALIZE_DEPTH), slot });
      }
      checkSignatureSubs();
      checkAccountSubs();
    }
  }

  function handleWsRequest(conn: WsConn, req: { id?: unknown; method?: unknown; params?: unknown }): Json {
    const p = Array.isArray(req.params) ? req.params : [];
    const cfg = (p[1] ?? {}) as Cfg;
    switch (req.method) {
      case 'signatureSubscribe': {
        if (typeof p[0] !== 'string') throw invalidParams('Invalid param: signature');
        const id = nextSubId++;
        const sub: Subscription = { kind: 'signature', conn, id, signature: p[0], commitment: normCommitment(cfg.commitment) };
        subs.set(id, sub);
        setImmediate(checkSignatureSubs); // after the subscription id has been sent
        return id;
      }
      case 'slotSubscribe': {
        const id = nextSubId++;
        subs.set(id, { kind: 'slot', conn, id });
        return id;
      }
      case 'accountSubscribe': {
        const pubkey = parsePubkey(p[0]);
        const encoding = typeof cfg.encoding === 'string' ? cfg.encoding : 'binary';
        const id = nextSubId++;
        subs.set(id, { kind: 'account', conn, id, pubkey, encoding, last: accountFingerprint(pubkey) });
        return id;
      }
      case 'logsSubscribe': {
        const f = p[0];
        let mentions: string | null = null;
        if (f && typeof f === 'object' && Array.isArray((f as { mentions?: unknown }).mentions)) {
          mentions = parsePubkey((f as { mentions: unknown[] }).mentions[0]);
        } else if (f !== 'all' && f !== 'allWithVotes') throw invalidParams('Invalid param: filter');
        const id = nextSubId++;
        subs.set(id, { kind: 'logs', conn, id, mentions });
        return id;
      }
      case 'signatureUnsubscribe':
      case 'slotUnsubscribe':
      case 'accountUnsubscribe':
      case 'logsUnsubscribe': {
        const sid = Number(p[0]);
        const s = subs.get(sid);
        if (!s || s.conn !== conn) return false;
        subs.delete(sid);
        return true;
      }
      default:
        throw new RpcError(-32601, 'Method not found');
    }
  }

  function onUpgrade(req: http.IncomingMessage, socket: Duplex) {
    const key = req.headers['sec-websocket-key'];
    if (typeof key !== 'string' || String(req.headers.upgrade).toLowerCase() !== 'websocket') {
      socket.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    const accept = crypto.createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    const conn: WsConn = new WsConn(
      socket,
      (text) => {
        let msg: unknown;
        try {
          msg = JSON.parse(text);
        } catch {
          conn.send({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null });
          return;
        }
        const reqs = Array.isArray(msg) ? msg : [msg];
        for (const r of reqs as { id?: unknown; method?: unknown; params?: unknown }[]) {
          if (!r || typeof r !== 'object') continue;
          if (r.id === undefined || r.id === null) continue; // notification (e.g. rpc-websockets' "ping")
          try {
            const result = handleWsRequest(conn, r);
            conn.send({ jsonrpc: '2.0', result, id: r.id });
          } catch (e) {
            const err = e instanceof RpcError ? e : new RpcError(-32603, errText(e));
            conn.send({ jsonrpc: '2.0', error: { code: err.code, message: err.message }, id: r.id });
          }
        }
      },
      () => {
        conns.delete(conn);
        for (const [id, s] of subs) if (s.conn === conn) subs.delete(id);
      },
    );
    conns.add(conn);
  }

  return { subs, conns, afterTransaction, onSlot, onUpgrade };
}

/** What createSubscriptions returns. */
export type Subscriptions = ReturnType<typeof createSubscriptions>;
