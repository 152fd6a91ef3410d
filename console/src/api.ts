/** The public API, with the session cookie (same origin). Errors keep the problem's stable code. */
export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

export async function api<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
  const res = await fetch(path, {
    method: init.method ?? 'GET',
    credentials: 'same-origin',
    headers: init.body !== undefined ? { 'content-type': 'application/json', accept: 'application/json' } : { accept: 'application/json' },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text;
  }
  if (!res.ok) {
    const p = (body ?? {}) as { code?: string; detail?: string };
    const err = new ApiError(res.status, p.code ?? `HTTP_${res.status}`, p.detail ?? res.statusText);
    // The session ended (expired, signed out elsewhere, principal revoked): back to the sign-in page.
    if (res.status === 401 && !path.startsWith('/v1/console/session')) window.dispatchEvent(new CustomEvent('writ:session-ended', { detail: err }));
    throw err;
  }
  return body as T;
}

export const q = (params: Record<string, string | number | undefined | null>) => {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') s.set(k, String(v));
  const out = s.toString();
  return out ? `?${out}` : '';
};

// Wire types (the OpenAPI document's components), as far as the console reads them.
export interface Scope { actions: string[]; resources: string[]; environments: string[]; fields: string[]; constraints: Record<string, unknown> }
export interface Edge {
  id: string; kind: string; from: string; to: string; scope: Scope; max_depth: number | null; creator: string; reason: string;
  created_at: string; not_before: string | null; expires_at: string | null; revoked_at: string | null; revision?: number;
}
export interface Principal { id: string; kind: string; priority_class: string; created_at: string; revoked_at: string | null }
export interface ReceiptEntry { seq: number; pos: number; kind?: string; at: string; hash?: string; prev_hash?: string; [k: string]: unknown }
export interface Receipt {
  receipt_id: string; coordination_id: string; status: string; principal: string; action: string; resource_key: string; fields: string[]; owners: string[];
  authority_epoch: number | null; ownership_epoch: number | null; decision_id: string | null; policy_revision: string | null; graph_revision: number | null;
  chain: string[]; lease_id: string | null; lease_epoch: number | null; expected_version: number | null; final_version: number | null;
  conflicts: { kind: string; detail?: string; expected?: unknown; actual?: unknown }[]; upstream_status: number | null;
  /** `used_by_receipt_id`: a DECISION_REPLAYED refusal's, the receipt of the write that used the decision (absent on refusals recorded before Writ kept it). */
  error: { code: string; message: string; used_by_receipt_id?: string } | null;
  created_at: string; completed_at: string | null; prev_hash: string; hash: string; hash_chain: string; entries: ReceiptEntry[];
  /** A REJECTED receipt refused for a lease reason: the lease the write presented (never its token); null otherwise. */
  presented_lease?: PresentedLease | null;
}
export interface PresentedLease {
  lease_id: string | null; token_lease_id: string | null;
  keys: { key: string; presented_epoch: number | null; current_epoch: number; holder: string | null; lease_id: string | null; state: 'HELD' | 'EXPIRED' | 'FREE' }[];
}
export interface Session { principal: string; auditor: boolean; expires_at: string }
export interface Capability { chain: Edge[]; valid: boolean; scope: Scope; problems: string[] }
export interface GraphEvent { revision: number; at: string; actor: string; type: string; subject: string; kind: string | null; from: string | null; to: string | null; reason: string | null }
export interface ImpactReport {
  graph_revision: number; computed_at: string; principals_examined: number;
  lost: { principal: string; capabilities: { action: string; resource: string; environment: string; fields: string[]; via: string[][] }[] }[];
  gained: { principal: string; capabilities: { action: string; resource: string; environment: string; fields: string[]; via: string[][] }[] }[];
  leases_ending: { lease_id: string; holder: string; keys: string[]; code: string; reason: string }[];
  orphaned_delegations: { edge: Edge; reasons: string[] }[];
  healed_delegations: { edge: Edge; reasons: string[] }[];
  approvals_ending: { edge: Edge; reasons: string[] }[];
}
