import type { Edge, Principal } from '../graph/model.js';
import { isoOrNull } from '../service/index.js';

/** Domain objects → v1 wire shapes (ms times become ISO-8601). */
export function principalToWire(p: Principal) {
  return { ...p, created_at: isoOrNull(p.created_at), revoked_at: isoOrNull(p.revoked_at) };
}

export function edgeToWire<T extends Pick<Edge, 'created_at' | 'not_before' | 'expires_at' | 'revoked_at'>>(e: T) {
  return {
    ...e,
    created_at: isoOrNull(e.created_at),
    not_before: isoOrNull(e.not_before),
    expires_at: isoOrNull(e.expires_at),
    revoked_at: isoOrNull(e.revoked_at),
  };
}
