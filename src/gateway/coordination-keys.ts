import { WritError } from '../errors.js';
import { parseFencingEpochs, WHOLE_POST_KEY } from '../wire/fencing-header.js';
import { CONFLICT_DOMAIN_PREFIX } from '../wire/key-family.js';
import { LEASE_TOKEN_SHAPE } from '../wire/lease-token.js';
import type { Obligations } from '../policy/types.js';

/** The field name that means every field, in a request as in a scope. */
const EVERY_FIELD = '*';

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
  // A request for field `*` is a request for every field, as the policy reads it (a grant of [title] does not
  // allow it): it coordinates on the resource's key, which no holder of one of its fields' keys shares
  // (src/wire/key-family.ts), not on a key `resource#*` leased beside them.
  if (fields.length === 0 || fields.includes(EVERY_FIELD)) {
    keys.add(resource);
  } else {
    for (const f of fields) {
      const cls = Object.hasOwn(obligations.field_classes, f) ? obligations.field_classes[f] : obligations.resource_class;
      if (cls === 'WRITE_EXCLUSIVE') keys.add(`${resource}#${f}`);
    }
    if (keys.size === 0) keys.add(resource);
  }
  if (obligations.conflict_domain) keys.add(`${CONFLICT_DOMAIN_PREFIX}${obligations.conflict_domain}`);
  return [...keys].sort();
}

/**
 * Reads `Writ-Fencing-Epoch` for a write that coordinates on `keys`: a bare number when there is one
 * key, else `key=epoch` pairs. Exactly the keys the write needs, each once: an extra key would reach
 * the upstream unchecked and could poison another key's fence there. Null when the header is absent.
 */
export function parseFencingHeader(header: string | undefined, keys: string[]): Map<string, number> | null {
  if (header === undefined || header.trim() === '') return null;
  const parsed = parseFencingEpochs(header);
  if (!parsed) {
    // The value is not repeated: what was sent in the wrong header (a lease token, a credential) would stay
    // for good in the refusal's receipt, which is hash-chained, and reach whoever reads it.
    const token = LEASE_TOKEN_SHAPE.test(header.trim()) ? '; it has the shape of a lease token, which goes in Writ-Lease-Token' : '';
    throw new WritError('MALFORMED_REQUEST', `Writ-Fencing-Epoch is not an epoch nor key=epoch pairs (each key once)${token}; its value is not repeated here`);
  }
  if (WHOLE_POST_KEY in parsed && Object.keys(parsed).length === 1) {
    if (keys.length !== 1) throw new WritError('MALFORMED_REQUEST', `this write needs fencing epochs for ${keys.length} keys (${keys.join(', ')}); send key=epoch pairs`);
    return new Map([[keys[0]!, parsed[WHOLE_POST_KEY]!]]);
  }
  for (const key of Object.keys(parsed)) {
    if (!keys.includes(key)) throw new WritError('MALFORMED_REQUEST', `Writ-Fencing-Epoch names ${key}, which this write does not coordinate on (it needs ${keys.join(', ')})`);
  }
  return new Map(Object.entries(parsed));
}
