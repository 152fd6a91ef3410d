/**
 * A WebSocket client written by hand over a TCP socket, for what a library client does not let a test
 * do: send a close frame and then neither read the server's answer nor end the connection, as a client
 * that hung (or was paused) just after saying goodbye does. The server's `ws` socket stays CLOSING
 * meanwhile ('close' fires only once the TCP connection ends, or after ws's 30 s close timer).
 */
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';

export interface RawWebSocket {
  socket: Socket;
  /** One masked text frame (as a client must send it). */
  sendText(text: string): void;
  /** One masked close frame with `code`; the TCP connection stays open. */
  sendClose(code?: number): void;
  /** Ends the TCP connection at once. */
  destroy(): void;
  /** The text messages the server sent, in order. */
  messages: string[];
  /** Resolves with its code once the server's close frame arrived (the server has read the client's, if one was sent). */
  serverClosed: Promise<number>;
}

function frame(opcode: number, payload: Buffer): Buffer {
  const mask = randomBytes(4);
  const n = payload.length;
  const head = n < 126 ? Buffer.from([0x80 | opcode, 0x80 | n])
    : n < 65_536 ? Buffer.from([0x80 | opcode, 0x80 | 126, n >> 8, n & 0xff])
      : Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | 127]), (() => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; })()]);
  const masked = Buffer.from(payload.map((byte, i) => byte ^ mask[i % 4]!));
  return Buffer.concat([head, mask, masked]);
}

/** Opens `path` on `url` (http://host:port) as a WebSocket with `headers`; resolves once the server answered 101. */
export async function openRawWebSocket(url: string, path: string, headers: Record<string, string>): Promise<RawWebSocket> {
  const { hostname, port } = new URL(url);
  // Half-open allowed: the server's end of the connection (after its close frame) does not end the client's.
  const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  const lines = [
    `GET ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, 'Upgrade: websocket', 'Connection: Upgrade',
    `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`, 'Sec-WebSocket-Version: 13',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  let head = '';
  while (!head.includes('\r\n\r\n')) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    head += chunk.toString('latin1');
  }
  if (!head.startsWith('HTTP/1.1 101')) {
    socket.destroy();
    throw new Error(`the upgrade was refused: ${head.split('\r\n')[0]}`);
  }
  // What the server sends from here on is read (its frames are unmasked) and never answered.
  const messages: string[] = [];
  let closedWith: (code: number) => void = () => {};
  const serverClosed = new Promise<number>((resolve) => (closedWith = resolve));
  let pending = Buffer.from(head.slice(head.indexOf('\r\n\r\n') + 4), 'latin1');
  const read = () => {
    for (;;) {
      if (pending.length < 2) return;
      const opcode = pending[0]! & 0x0f;
      let n = pending[1]! & 0x7f;
      let at = 2;
      if (n === 126) {
        if (pending.length < 4) return;
        n = pending.readUInt16BE(2);
        at = 4;
      } else if (n === 127) {
        if (pending.length < 10) return;
        n = Number(pending.readBigUInt64BE(2));
        at = 10;
      }
      if (pending.length < at + n) return;
      const payload = pending.subarray(at, at + n);
      pending = pending.subarray(at + n);
      if (opcode === 0x1) messages.push(payload.toString('utf8'));
      if (opcode === 0x8) closedWith(payload.length >= 2 ? payload.readUInt16BE(0) : 1005);
    }
  };
  socket.on('data', (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    read();
  });
  read();
  return {
    socket,
    messages,
    serverClosed,
    sendText: (text) => void socket.write(frame(0x1, Buffer.from(text, 'utf8'))),
    sendClose: (code = 1000) => {
      const payload = Buffer.alloc(2);
      payload.writeUInt16BE(code);
      socket.write(frame(0x8, payload));
    },
    destroy: () => void socket.destroy(),
  };
}
