import { WritError } from '../errors.js';
import type { Obligations } from '../policy/types.js';

/**
 * The coordination keys a write must hold leases on, derived from the decision — agents never
 * invent keys. Exclusive fields are coordinated per field (`wp:post:1024#title`), so two agents
 * editing different fields of one post run in parallel while two on the same field are serialized;
 * a whole-resource write uses the resource key; a conflict domain adds `domain:<NAME>`, so different
 * keys that conflict semantically (a canonical template and a bulk canonical edit) coordinate.
 */
export function coordinationKeys(resource: string, fields: string[], obligations: Obligations): string[] {
  if (!obligations.lease_required) return [];
  const keys = new Set<string>();
  if (fields.length === 0) {
    keys.add(resource);
  } else {
    for (const f of fields) {
      const cls = Object.hasOwn(obligations.field_classes, f) ? obligations.field_classes[f] : obligations.resource_class;
      if (cls === 'WRITE_EXCLUSIVE') keys.add(`${resource}#${f}`);
    }
    if (keys.size === 0) keys.add(resource);
  }
  if (obligations.conflict_domain) keys.add(`domain:${obligations.conflict_domain}`);
  return [...keys].sort();
}

/**
 * `Writ-Fencing-Epoch`: a bare number when the write needs one key, else `key=epoch` pairs separated
 * by commas (the SDK writes the pairs always). Exactly the keys the write needs, each once: an extra
 * key would reach the upstream unchecked and could poison another key's fence there.
 */
export function parseFencingHeader(header: string | undefined, keys: string[]): Map<string, number> | null {
  if (header === undefined || header.trim() === '') return null;
  const out = new Map<string, number>();
  const epoch = (s: string) => {
    if (!/^\d{1,15}$/.test(s.trim())) throw new WritError('MALFORMED_REQUEST', `Writ-Fencing-Epoch: "${s}" is not an epoch number`);
    return Number(s.trim());
  };
  if (!header.includes('=')) {
    if (keys.length !== 1) throw new WritError('MALFORMED_REQUEST', `this write needs fencing epochs for ${keys.length} keys (${keys.join(', ')}); send key=epoch pairs`);
    out.set(keys[0]!, epoch(header));
    return out;
  }
  for (const part of header.split(',')) {
    const i = part.lastIndexOf('=');
    if (i <= 0) throw new WritError('MALFORMED_REQUEST', `Writ-Fencing-Epoch: "${part.trim()}" is not key=epoch`);
    const key = part.slice(0, i).trim();
    if (out.has(key)) throw new WritError('MALFORMED_REQUEST', `Writ-Fencing-Epoch names ${key} twice`);
    if (!keys.includes(key)) throw new WritError('MALFORMED_REQUEST', `Writ-Fencing-Epoch names ${key}, which this write does not coordinate on (it needs ${keys.join(', ')})`);
    out.set(key, epoch(part.slice(i + 1)));
  }
  return out;
}

export function formatFencingHeader(epochs: Record<string, number>): string {
  return Object.keys(epochs)
    .sort()
    .map((k) => `${k}=${epochs[k]}`)
    .join(', ');
}
