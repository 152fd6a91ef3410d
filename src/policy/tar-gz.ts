/** Reads the regular files of a .tar.gz in memory (an OPA bundle is a few small files). */
import { gunzipSync } from 'node:zlib';

export function readTarGz(archive: Uint8Array): Map<string, Buffer> {
  const tar = gunzipSync(archive);
  const files = new Map<string, Buffer>();
  let offset = 0;
  while (offset + 512 <= tar.length) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((b) => b === 0)) break;
    const name = field(header, 0, 100);
    const prefix = field(header, 345, 155);
    const size = parseInt(field(header, 124, 12).trim() || '0', 8);
    const type = String.fromCharCode(header[156] ?? 0);
    const body = offset + 512;
    if (type === '0' || type === '\0') {
      const path = (prefix ? `${prefix}/${name}` : name).replace(/^\/+/, '');
      files.set(path, Buffer.from(tar.subarray(body, body + size)));
    }
    offset = body + Math.ceil(size / 512) * 512;
  }
  return files;
}

function field(header: Uint8Array, start: number, length: number): string {
  const bytes = header.subarray(start, start + length);
  const end = bytes.indexOf(0);
  return Buffer.from(end === -1 ? bytes : bytes.subarray(0, end)).toString('utf8');
}
