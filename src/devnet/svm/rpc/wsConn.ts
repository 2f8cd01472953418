// A minimal server side of a WebSocket connection (RFC 6455, text frames), and the subscriptions one holds.

import type { Duplex } from 'node:stream';
import type { Commitment } from './codec.ts';

// ---------------------------------------------------------------------------------------------------------
// Minimal WebSocket server side (RFC 6455, text frames)

/** The server side of one WebSocket connection: text frames in and out, pings answered. */
export class WsConn {
  private buf = Buffer.alloc(0);
  private fragments: Buffer[] = [];
  closed = false;
  constructor(
    private readonly socket: Duplex,
    private readonly onMessage: (text: string) => void,
    private readonly onClose: () => void,
  ) {
    socket.on('data', (c: Buffer) => this.onData(c));
    socket.on('close', () => this.finish());
    socket.on('error', () => this.finish());
  }
  private finish() {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
  private onData(chunk: Buffer) {
    this.buf = Buffer.concat([this.buf, chunk]);
    for (;;) {
      if (this.buf.length < 2) return;
      const b0 = this.buf[0]!;
      const b1 = this.buf[1]!;
      const opcode = b0 & 0x0f;
      const fin = (b0 & 0x80) !== 0;
      const masked = (b1 & 0x80) !== 0;
      let len = b1 & 0x7f;
      let off = 2;
      if (len === 126) {
        if (this.buf.length < 4) return;
        len = this.buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (this.buf.length < 10) return;
        len = Number(this.buf.readBigUInt64BE(2));
        off = 10;
      }
      const maskLen = masked ? 4 : 0;
      if (this.buf.length < off + maskLen + len) return;
      const mask = masked ? this.buf.subarray(off, off + 4) : null;
      const payload = Buffer.from(this.buf.subarray(off + maskLen, off + maskLen + len));
      if (mask) for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i & 3]!;
      this.buf = this.buf.subarray(off + maskLen + len);
      if (opcode === 0x8) {
        this.close();
        return;
      } else if (opcode === 0x9) {
        this.frame(0xa, payload);
      } else if (opcode === 0x1 || opcode === 0x2 || opcode === 0x0) {
        this.fragments.push(payload);
        if (fin) {
          const text = Buffer.concat(this.fragments).toString('utf8');
          this.fragments = [];
          this.onMessage(text);
        }
      }
    }
  }
  private frame(opcode: number, payload: Buffer) {
    if (this.closed) return;
    let header: Buffer;
    if (payload.length < 126) header = Buffer.from([0x80 | opcode, payload.length]);
    else if (payload.length < 65536) {
      header = Buffer.alloc(4);
      header[0] = 0x80 | opcode;
      header[1] = 126;
      header.writeUInt16BE(payload.length, 2);
    } else {
      header = Buffer.alloc(10);
      header[0] = 0x80 | opcode;
      header[1] = 127;
      header.writeBigUInt64BE(BigInt(payload.length), 2);
    }
    this.socket.write(Buffer.concat([header, payload]));
  }
  send(obj: unknown) {
    this.frame(0x1, Buffer.from(JSON.stringify(obj), 'utf8'));
  }
  close() {
    if (this.closed) return;
    try {
      this.frame(0x8, Buffer.alloc(0));
      this.socket.end();
    } catch {
      /* socket already gone */
    }
    this.socket.destroy();
    this.finish();
  }
}

/** A subscription a connection holds, by kind. */
export type Subscription =
  | { kind: 'signature'; conn: WsConn; id: number; signature: string; commitment: Commitment }
  | { kind: 'slot'; conn: WsConn; id: number }
  | { kind: 'account'; conn: WsConn; id: number; pubkey: string; encoding: string; last: string }
  | { kind: 'logs'; conn: WsConn; id: number; mentions: string | null };
