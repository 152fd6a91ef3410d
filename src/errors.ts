/**
 * The one error catalogue. Every refusal Writ gives has a stable `code` from this table; the HTTP
 * layer (src/http/problem.ts) is the single place that turns a code into a status and
 * `application/problem+json`. README "Error codes" is generated from / checked against this table.
 */
export interface ErrorSpec {
  readonly status: number;
  readonly title: string;
  /** What it means and what the caller can do about it. */
  readonly meaning: string;
}

export const ERROR_CATALOGUE = {
  // input
  MALFORMED_REQUEST: { status: 400, title: 'Malformed request', meaning: 'The body is not valid JSON or does not match the schema (unknown field, wrong type, missing field), or a string in the body, query, path or headers is not well-formed Unicode (a lone UTF-16 surrogate). Nothing was changed.' },
  NESTING_TOO_DEEP: { status: 400, title: 'Nesting too deep', meaning: 'The JSON body nests objects and arrays deeper than the configured limit (`WRIT_JSON_MAX_DEPTH`, 64 by default). Nothing was changed.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type', meaning: 'A request body must be `application/json` in UTF-8 (no other charset). Nothing was changed.' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large', meaning: 'The body is larger than the configured limit. Nothing was changed.' },
  UNPROCESSABLE: { status: 422, title: 'Unprocessable', meaning: 'The request is well formed but its values are inconsistent (e.g. an invalid resource pattern or time window).' },
  UNKNOWN_PRINCIPAL: { status: 404, title: 'Unknown principal', meaning: 'No principal with that id is registered.' },
  UNKNOWN_RESOURCE: { status: 404, title: 'Unknown resource', meaning: 'The resource key is not a canonical coordination key nor a registered alias.' },
  UNKNOWN_EDGE: { status: 404, title: 'Unknown edge', meaning: 'No edge with that id exists.' },
  NOT_FOUND: { status: 404, title: 'Not found', meaning: 'Nothing exists at that path or id.' },
  ALREADY_EXISTS: { status: 409, title: 'Already exists', meaning: 'An object with that id exists with different content (manifests are applied idempotently only for identical objects); or, over the API, an edge with that id was revoked (it stays revoked: a new one needs a new id; `{edge_id}`), or is one the caller may not read (the id is taken: choose another or omit it).' },
  // callers
  UNAUTHENTICATED: { status: 401, title: 'Unauthenticated', meaning: 'The caller assertion (or a caller session\'s request token) is missing, malformed, expired, replayed, not signed by a key of its principal (not MACed with its session\'s key, or for another method or path), or its principal is revoked.' },
  CALLER_SESSION_INVALID: { status: 401, title: 'Caller session invalid', meaning: 'The caller session named by the request token (`kid` of an HS256 token) is unknown to this deployment, malformed, expired, sealed by a signing key that has left the key ring, or its principal no longer has the key that opened it. Open a new session (POST /v1/sessions) with a caller assertion. The request had no effect.' },
  CALLER_SESSIONS_DISABLED: { status: 403, title: 'Caller sessions disabled', meaning: 'Caller sessions are turned off on this deployment (`WRIT_CALLER_SESSION_MAX_TTL_MS=0`): POST /v1/sessions and requests authenticated by a session are refused. Sign a caller assertion for each request. Nothing was changed.' },
  LOGIN_LINK_INVALID: { status: 401, title: 'Login link invalid', meaning: 'The console login link (`writ console`) is malformed, expired, not signed by a Writ key, or names a principal that is unknown or revoked. Ask for a new link.' },
  LOGIN_LINK_SPENT: { status: 401, title: 'Login link already used', meaning: 'A console login link signs in once; this one was already exchanged for a session (by you, or by whoever else saw the link). Ask for a new link with `writ console`.' },
  SESSION_READ_ONLY: { status: 403, title: 'Console session is read-only', meaning: 'A console session cookie authenticates reads only (GET, and POST /v1/impact, which computes without changing anything). Anything that changes state needs a signed caller assertion. Nothing was changed.' },
  FORBIDDEN: { status: 403, title: 'Forbidden', meaning: 'The authenticated caller may not perform this administrative act (e.g. only governance may create grants).' },
  // authority
  ATTENUATION_VIOLATION: { status: 403, title: 'Attenuation violation', meaning: 'A delegation would give more than its delegator holds; the message names the dimension and the values that exceed.' },
  OWNERSHIP_CONFLICT: { status: 409, title: 'Ownership conflict', meaning: 'That managed state already has a live owner; revoke it first.' },
  TOO_MANY_DELEGATIONS: { status: 409, title: 'Too many delegations', meaning: 'The delegator already has as many unrevoked, unexpired delegations to that delegate as one principal may give another (`WRIT_MAX_DELEGATIONS_BETWEEN`, 16 by default); the message names the bound. Revoke one first (or let it expire). Nothing was written.' },
  BUDGET_EXCEEDED: { status: 503, title: 'Chain resolution budget exceeded', meaning: 'Chain resolution examined more than 20 000 edges before finding a chain; the graph is too wide for this request.' },
  POLICY_UNAVAILABLE: { status: 503, title: 'Policy unavailable', meaning: 'No policy bundle is loaded (build it with `writ policy build`).' },
  // decisions
  DECISION_INVALID: { status: 403, title: 'Decision invalid', meaning: 'The decision token is missing, malformed, not signed by a Writ key, uses a forbidden algorithm, is for another audience or is not an allow; or it is issued more than 5 s in the future (the signing replica\'s clock is ahead), or lives longer than this replica\'s `WRIT_DECISION_TTL_MS`.' },
  DECISION_EXPIRED: { status: 403, title: 'Decision expired', meaning: 'The decision token has expired; ask for a new decision.' },
  DECISION_MISMATCH: { status: 403, title: 'Decision mismatch', meaning: 'The decision was made for another principal, action, resource, environment or field set than this request.' },
  DECISION_REPLAYED: { status: 403, title: 'Decision replayed', meaning: 'The decision has already been used for a write; a decision authorizes one write. From POST /v1/actions, `used_by_receipt_id` names the receipt of that write.' },
  AUTHORITY_REVOKED: { status: 403, title: 'Authority revoked', meaning: 'An edge or principal of the decision\'s chain was revoked, or expired, after the decision was made.' },
  OWNER_CHANGED: { status: 409, title: 'Owner changed', meaning: 'The owner of the managed state changed after the decision was made; ask for a new decision.' },
  // coordination
  RESOURCE_BUSY: { status: 423, title: 'Resource busy', meaning: 'Another lease holds the key, or a key of its family (the resource\'s key for a field\'s, a field\'s for the resource\'s: `held_key`), or a waiter ahead has it reserved (`queued`); `Retry-After` and `holder` say when and who.' },
  LEASE_REQUIRED: { status: 423, title: 'Lease required', meaning: 'The resource is exclusive and the write carries no lease token.' },
  LEASE_EXPIRED: { status: 423, title: 'Lease expired', meaning: 'The lease is expired or released; take a new one (an acquisition asked again with the `token` of a lease that has ended: with a fresh token).' },
  LEASE_NOT_FOUND: { status: 404, title: 'Lease not found', meaning: 'No lease with that id.' },
  LEASE_TOKEN_MISMATCH: { status: 423, title: 'Lease token mismatch', meaning: 'The token is not the current holder\'s token for this lease.' },
  LEASE_PREEMPTED: { status: 409, title: 'Lease preempted', meaning: 'The lease was taken over by an incident authority; the old holder is fenced out.' },
  LEASE_WAIT_TIMEOUT: { status: 423, title: 'Lease wait timed out', meaning: 'The resource stayed busy until the caller\'s wait deadline.' },
  STALE_FENCING_EPOCH: { status: 409, title: 'Stale fencing epoch', meaning: 'The fencing epoch is not the lease\'s current epoch or is below the resource\'s high-water mark.' },
  VERSION_CONFLICT: { status: 409, title: 'Version conflict', meaning: 'A field the write names changed after `expected_version` (or `expected_version` is ahead of the resource); re-read and retry. Never last-write-wins.' },
  VERSION_REQUIRED: { status: 428, title: 'Version required', meaning: 'The resource class requires expected_version on writes.' },
  NO_INCIDENT: { status: 403, title: 'No active incident', meaning: 'Preemption is only possible during an active incident declared for the environment of the lease (of the decisions presented, and of the lease taken over); `environments` names those without one.' },
  IDEMPOTENCY_MISMATCH: { status: 422, title: 'Idempotency key reused', meaning: 'The Idempotency-Key was already used for a different request; or a lease acquisition\'s own `token` was already used for a lease of other keys, or by another principal (send a fresh token). Nothing was changed.' },
  // upstream and service
  UPSTREAM_FAILED: { status: 502, title: 'Upstream failed', meaning: 'The upstream refused or failed the write. A refusal (4xx) or a refused connection leaves the receipt FAILED; a 5xx answer does not say whether the upstream applied the write, so the receipt stays PENDING until reconciled (`receipt_status` says which).' },
  UPSTREAM_TIMEOUT: { status: 504, title: 'Upstream timeout', meaning: 'The upstream did not answer in time; the receipt stays PENDING until reconciled.' },
  NO_UPSTREAM: { status: 502, title: 'No upstream', meaning: 'No upstream route is configured for this resource.' },
  RATE_LIMITED: { status: 429, title: 'Rate limited', meaning: 'The calling principal is over its request rate (`WRIT_RATE_LIMIT_PER_S`); retry after `Retry-After`. Governance is not limited. Nothing was changed and the caller assertion was not spent.' },
  OVERLOADED: { status: 503, title: 'Overloaded', meaning: 'The service is shedding load; retry after `Retry-After`.' },
  CLOCK_SKEW: { status: 503, title: 'Clock skewed from the database\'s', meaning: 'From GET /readyz only (PostgreSQL): this replica\'s clock is off the database\'s by more than `WRIT_CLOCK_OFFSET_MAX_MS` (60 s by default), beyond which it refuses nearly every caller (lease time and single-use expiry are the database\'s clock), so it asks to be taken out of rotation; `clock_offset_ms` says by how much (negative: behind). Set the clock right (NTP). Requests are never answered with it: a refusal the clocks caused keeps its own code (`UNAUTHENTICATED`, `DECISION_EXPIRED`, `LOGIN_LINK_INVALID`) and says so in its message and `clock_offset_ms`.' },
  SCHEMA_TOO_NEW: { status: 503, title: 'Store schema too new', meaning: 'The store was migrated by a newer Writ than this one; this server refuses to start on it (run that version or a newer one). Nothing was changed.' },
  SCHEMA_DIVERGED: { status: 409, title: 'Store schema diverged', meaning: 'The store\'s applied migrations are not a prefix of this Writ\'s: one of its migrations is missing below a later one the store has, or the store has a number this Writ does not, or under another name (a Writ whose migrations are numbered otherwise, a build of another branch or a fork, migrated it). The message names each. This server refuses to start on it: start the Writ that migrated it, or put back a backup taken before that. Nothing was changed.' },
  STORE_FAILED: { status: 503, title: 'Store failed', meaning: 'The disk reported an error while making writes durable (a failed sync). The outcome of the writes in flight is unknown, and the process refuses every request that touches the store until it is restarted (crash recovery then keeps exactly what reached the disk).' },
  STORE_IN_USE: { status: 409, title: 'Store in use', meaning: 'A restore or `writ store copy` was refused because another process (a running Writ) has the SQLite store file open; stop it first. Or a Writ could not open the store because another process (a restore or a copy in progress) held it locked past the busy timeout; wait for it to finish. Nothing was changed.' },
  STORE_DAMAGED: { status: 409, title: 'Store damaged', meaning: 'The SQLite store is damaged (malformed, or not a database). A restore was refused because it carries the fencing epochs the replaced store issued so that they keep rising, and cannot read them: `writ restore … --replace-damaged --epoch-margin N` replaces it anyway (kept aside, epochs raised by N only), or move it aside (with its -wal and -shm) yourself. `writ backup` and `writ store copy` were refused because they read the whole store, and `writ serve` or any other command on the data directory because it cannot open it: put an earlier backup back (as above), or recover what can be read into a new file. Nothing was changed.' },
  STORE_MOVED: { status: 409, title: 'Store moved to PostgreSQL', meaning: 'The SQLite file was copied to PostgreSQL with `writ store copy`, and the database is the store now: a server on the file would issue fencing epochs the database issued and know nothing written there. Start with `--database` (`WRIT_DATABASE_URL`) naming the database the message names. A copy that was stopped before it finished leaves the file refused as well (the database may hold the copy): run the same `writ store copy --to …` again, which copies the file or confirms the copy the database committed. To go back to the file deliberately, `writ lease bump-epochs --by N --reason TEXT --lift-move-mark` on it (N at least the database\'s highest epoch: the file cannot check it) lifts the refusal; without `--lift-move-mark` it is refused. Nothing was changed.' },
  STORE_BEHIND_MARK: { status: 409, title: 'Database behind this replica\'s mark', meaning: 'The PostgreSQL database is behind what this replica saw of it (its high-water mark, `store-mark.json` in the data directory: highest fencing epoch, epoch floor, receipt log, graph revision, epoch bumps), and no epoch bump has been recorded since: it was restored from a backup or recovered to an earlier point, and fencing epochs issued after that point would be issued again to other holders. The message says which figure went back, from what to what: run `writ lease bump-epochs --by N --reason TEXT --database …` with the N it gives, then start again (any bump recorded since the mark is taken, whatever its size: a smaller N starts and may issue epochs again). A replica with no mark (a new data directory) checks nothing. Nothing was changed.' },
  GRAPH_LOG_UNHASHED: { status: 409, title: 'Graph log holds unhashed events', meaning: 'Every graph event must be hashed (`WRIT_GRAPH_REQUIRE_HASHES` is on) and the graph log ends with events that are not: a Writ from before the graph log\'s hash chain (a replica not upgraded) appended them. The change was refused rather than hashing them, and nothing was changed. Stop or upgrade that replica; `GET /v1/graph/events` shows the events (`hash` null). To accept them, turn the setting off on one replica for one graph change (it hashes them first), then on again.' },
  RECEIPT_DAMAGED: { status: 500, title: 'Stored receipt damaged', meaning: 'A receipt entry in the store is not what Writ wrote (its body cannot be read): the receipt log was altered outside Writ. The request was not at fault and nothing was changed; `writ audit verify` (GET /v1/audit/verify) names the first damaged entry.' },
  INTERNAL: { status: 500, title: 'Internal error', meaning: 'A bug or an unexpected failure; the log has the details.' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** A domain error with a stable code. Domain code throws these; it never knows about HTTP. */
export class WritError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: ErrorCode, message?: string, details?: Record<string, unknown>) {
    super(message ?? ERROR_CATALOGUE[code].title);
    this.name = 'WritError';
    this.code = code;
    this.details = details;
  }
}

export function isWritError(e: unknown): e is WritError {
  return e instanceof WritError;
}

/** The README's error table, generated from the catalogue (a test checks the README carries exactly this). */
export function renderErrorTable(): string {
  const rows = Object.entries(ERROR_CATALOGUE).map(([code, spec]) => `| \`${code}\` | ${spec.status} | ${spec.meaning.replace(/\|/g, '\\|')} |`);
  return ['| code | HTTP | meaning |', '|---|---|---|', ...rows].join('\n');
}
