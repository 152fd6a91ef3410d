import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse, stringify } from 'yaml';
import { WritError } from '../errors.js';
import { dottedPath, schemaChecker } from '../json-schema.js';
import { principalEnds, type AuthorityGraph } from '../graph/index.js';
import { toWireTimeOrNull } from '../wire/time.js';
import { GOVERNANCE_ID, type Edge, type GraphEvent, type PublicJwk } from '../graph/model.js';
import { approvalBody, delegationBody, grantBody, ownershipBody, preemptionBody, principalBody } from '../wire/graph-bodies.js';
import type { WritContext } from './context.js';
import { checkNotEnded, createApproval, createDelegation, createGrant, createOwnership, createPreemption, ownershipScope, type ApprovalInput, type DelegationInput, type GrantInput, type OwnershipInput, type PreemptionInput } from './edges.js';
import { commitGraphChange, forkGraphWriter } from './graph-changes.js';
import { registerPrincipal, type PrincipalInput } from './principals.js';
import { orphansIn } from './audit-queries.js';
import { registryProblem, scopeAppliesInPart, scopeProblems } from './resources.js';
import { normalizeScope, publicPart, window } from './validate.js';

/**
 * A declarative graph definition (graph/*.yaml), applied idempotently like a manifest: objects are
 * identified by id; an identical object is left alone, a principal listed with other keys gets them,
 * and any other difference under the same id is refused.
 */
export interface GraphManifest {
  principals?: (Omit<PrincipalInput, 'keys'> & { keys?: PublicJwk[]; key_files?: string[] })[];
  grants?: GrantInput[];
  delegations?: DelegationInput[];
  ownerships?: OwnershipInput[];
  approvals?: ApprovalInput[];
  preemptions?: PreemptionInput[];
}

export interface ApplyReport {
  created: string[];
  /** Items that existed and were changed: a principal whose keys the manifest replaced. */
  updated: string[];
  unchanged: string[];
  /**
   * Of the unchanged, the edges revoked in the graph: applying the manifest again does not restore them
   * (a revoked edge stays revoked; granting it again takes a new id).
   */
  revoked: string[];
  /**
   * With `skipExpired`: the manifest's edges left out because they expired already (not in the graph
   * under their id, and their expires_at not after now: created, they would never count), with why.
   */
  skipped: { id: string | null; why: string }[];
  /** The graph revision after the change; on a dry run, the revision it was planned on. */
  graph_revision: number;
}

const SECTIONS = ['principals', 'grants', 'delegations', 'ownerships', 'approvals', 'preemptions'] as const;

export function readManifest(file: string): { manifest: GraphManifest; baseDir: string } {
  let doc: unknown;
  try {
    doc = parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new WritError('MALFORMED_REQUEST', `cannot read graph manifest ${file}: ${(e as Error).message}`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new WritError('MALFORMED_REQUEST', `${file}: a manifest is a mapping of ${SECTIONS.join(', ')}`);
  return { manifest: doc as GraphManifest, baseDir: dirname(resolve(file)) };
}

/**
 * A manifest's items are the bodies of the API's writes (a principal may also name `key_files`, read
 * relative to the manifest), checked with the very schemas HTTP checks them with: before, a field the
 * API refuses as unknown was dropped here without a word, and some of those widen what an edge gives
 * (a misspelt `fields` or `environments` meant every one, a misspelt `expires_at` never expired).
 */
const MANIFEST_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    principals: {
      type: 'array',
      items: {
        ...principalBody,
        required: ['id', 'kind'],
        properties: { ...principalBody.properties, key_files: { type: 'array', items: { type: 'string', minLength: 1 }, maxItems: 16 } },
      },
    },
    grants: { type: 'array', items: grantBody },
    delegations: { type: 'array', items: delegationBody },
    ownerships: { type: 'array', items: ownershipBody },
    approvals: { type: 'array', items: approvalBody },
    preemptions: { type: 'array', items: preemptionBody },
  },
} as const;

const manifestProblems = schemaChecker(MANIFEST_SCHEMA, {
  // `delegations[0] (d-bot).scope`: the item's id too where it has one, as the apply's errors name it.
  place: (segments, doc) => {
    const [section, index, ...rest] = segments;
    if (section === undefined) return 'the manifest';
    if (index === undefined) return section;
    const id = (doc as Record<string, { id?: unknown }[]>)[section]?.[Number(index)]?.id;
    return `${section}[${index}]${typeof id === 'string' ? ` (${id})` : ''}${dottedPath(rest)}`;
  },
});

/** Throws MALFORMED_REQUEST listing every item that is not what the API would accept as its body (nothing is written). */
function checkManifestShape(manifest: unknown): void {
  const problems = manifestProblems(manifest);
  if (problems.length === 0) return;
  throw new WritError('MALFORMED_REQUEST', `the graph manifest has ${problems.length === 1 ? 'a problem' : `${problems.length} problems`}; nothing was applied:\n${problems.map((p) => `  - ${p}`).join('\n')}`, {
    problems,
  });
}

/**
 * Throws UNPROCESSABLE listing every edge of the manifest to be created whose scope could never apply
 * under the policy's registry (an action, a pattern or an environment it does not have: scopeProblems),
 * so that one run names every typo, as the shape check does. Edges already in `graph` under their id are
 * left to the plan (unchanged, or refused as a change to an immutable edge), and so is a scope too
 * malformed to read (the plan names it).
 */
function checkManifestRegistry(ctx: WritContext, graph: AuthorityGraph, manifest: GraphManifest, skipExpired: boolean): void {
  const now = ctx.clock.now();
  const problems: string[] = [];
  const sections: [string, Edge['kind'], { id?: string; scope?: unknown; resource?: string; fields?: string[] }[] | undefined][] = [
    ['grants', 'grant', manifest.grants],
    ['delegations', 'delegate', manifest.delegations],
    ['ownerships', 'owns', manifest.ownerships],
    ['approvals', 'approves', manifest.approvals],
  ];
  for (const [section, kind, items] of sections) {
    (items ?? []).forEach((item, i) => {
      if (item.id !== undefined && graph.edge(item.id) !== undefined) return;
      if (skipExpired && expiredNewEdge(graph, item, now) !== null) return;
      let scope: Edge['scope'];
      try {
        scope = kind === 'owns' ? ownershipScope(item as OwnershipInput) : normalizeScope(item.scope as GrantInput['scope']);
      } catch {
        return;
      }
      const at = `${section}[${i}]${item.id === undefined ? '' : ` (${item.id})`}`;
      for (const problem of scopeProblems(ctx.policy.data, kind, scope)) {
        problems.push(kind === 'owns' ? `${at}.${problem.replace(/^scope\.resources: /, 'resource: ')}` : `${at}.${problem}`);
      }
    });
  }
  if (problems.length === 0) return;
  throw new WritError('UNPROCESSABLE', `the graph manifest has ${problems.length === 1 ? 'an edge that could never apply under the policy' : `edges that could never apply under the policy (${problems.length} problems)`}; nothing was applied:\n${problems.map((p) => `  - ${p}`).join('\n')}`, {
    problems,
  });
}

/**
 * When a manifest edge expired, if it is one to be created: not in `graph` under its id, and its
 * expires_at not after `now` (created, it would never count: createEdge refuses it); else null. An edge
 * in the graph under its id goes the usual way (unchanged, or refused as a change); an unreadable window
 * is the plan's to name.
 */
function expiredNewEdge(graph: AuthorityGraph, item: unknown, now: number): number | null {
  const { id, not_before, expires_at } = (item ?? {}) as { id?: unknown; not_before?: string | number | null; expires_at?: string | number | null };
  if (typeof id === 'string' && graph.edge(id) !== undefined) return null;
  let ends: number | null;
  try {
    ends = window(not_before, expires_at).expires_at;
  } catch {
    return null;
  }
  return ends !== null && ends <= now ? ends : null;
}

/** createEdge's refusal of an edge that ended already, saying how to apply the rest of the manifest. */
function refuseExpired(expiresAt: number, now: number): never {
  try {
    checkNotEnded(expiresAt, now);
  } catch (e) {
    if (e instanceof WritError) throw new WritError(e.code, `${e.message} (an old export, say: writ graph apply --skip-expired applies the rest, listing the expired edges it leaves out)`, e.details);
    throw e;
  }
  throw new WritError('INTERNAL', `refuseExpired on an edge that has not expired (${expiresAt} > ${now})`);
}

/** How a manifest item is named in errors: its section's word and its id. */
function itemName(what: string, item: unknown): string {
  return `${what} ${(item as { id?: unknown } | null)?.id ?? '(no id)'}`;
}

/** Names the manifest item in every error, and turns a malformed item (a missing scope, a wrong type) into MALFORMED_REQUEST. */
async function asManifestError<T>(item: string, fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof WritError) throw new WritError(e.code, `${item}: ${e.message}`, e.details);
    throw new WritError('MALFORMED_REQUEST', `${item} is malformed: ${(e as Error).message}`);
  }
}

function readKeyFile(file: string): PublicJwk {
  let jwk: unknown;
  try {
    jwk = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new WritError('MALFORMED_REQUEST', `cannot read key file ${file}: ${(e as Error).message}`);
  }
  if (!jwk || typeof jwk !== 'object') throw new WritError('MALFORMED_REQUEST', `key file ${file} does not hold a JWK`);
  return publicPart(jwk as Record<string, unknown>);
}

/**
 * Applies a manifest as `caller` (governance) — or, with `dryRun`, says what applying it now would do
 * and writes nothing — all or nothing: every item is planned on a working copy
 * of the graph, in order — principals, grants, delegations (file order), ownerships, approvals,
 * preemptions — each seeing the items before it, and the changes are appended in one commit. An item
 * that fails (a key file that cannot be read, an unknown principal, a delegation wider than its
 * delegator holds, a scope that could never apply) fails the manifest, naming the item, and nothing
 * is written. If another process changes the graph meanwhile, the whole manifest is planned again.
 */
export async function applyManifest(ctx: WritContext, caller: string, manifest: GraphManifest, baseDir: string, options: { dryRun?: boolean; skipExpired?: boolean } = {}): Promise<ApplyReport> {
  const skipExpired = options.skipExpired === true;
  checkManifestShape(manifest);
  checkManifestRegistry(ctx, await ctx.graph.current(), manifest, skipExpired);
  let report: ApplyReport = { created: [], updated: [], unchanged: [], revoked: [], skipped: [], graph_revision: 0 };
  const plan = async (graph: AuthorityGraph, now: number): Promise<GraphEvent[]> => {
    const events: GraphEvent[] = [];
    const writer = forkGraphWriter(graph, caller, now, events);
    report = { created: [], updated: [], unchanged: [], revoked: [], skipped: [], graph_revision: 0 };
    const note = (what: string, created: boolean, eventsBefore: number) => {
      (created ? report.created : events.length > eventsBefore ? report.updated : report.unchanged).push(what);
    };
    for (const p of manifest.principals ?? []) {
      const before = events.length;
      const r = await asManifestError(itemName('principal', p), () => {
        const keys = [...(p.keys ?? []), ...(p.key_files ?? []).map((f) => readKeyFile(resolve(baseDir, f)))];
        const { key_files: _kf, ...rest } = p;
        return registerPrincipal(ctx, caller, { ...rest, keys }, writer);
      });
      note(`principal ${p.id}`, r.created, before);
    }
    const edgeSections: [string, unknown[] | undefined, (input: never) => Promise<{ created: boolean; edge: { id: string; revoked_at: number | null } }>][] = [
      ['grant', manifest.grants, (i) => createGrant(ctx, caller, i, writer)],
      ['delegation', manifest.delegations, (i) => createDelegation(ctx, caller, i, writer)],
      ['ownership', manifest.ownerships, (i) => createOwnership(ctx, caller, i, writer)],
      ['approval', manifest.approvals, (i) => createApproval(ctx, caller, i, writer)],
      ['preemption', manifest.preemptions, (i) => createPreemption(ctx, caller, i, writer)],
    ];
    for (const [what, items, create] of edgeSections) {
      for (const item of items ?? []) {
        const expired = expiredNewEdge(await writer.current(), item, now);
        if (expired !== null) {
          if (!skipExpired) await asManifestError(itemName(what, item), () => refuseExpired(expired, now));
          const id = (item as { id?: unknown } | null)?.id;
          report.skipped.push({ id: typeof id === 'string' ? id : null, why: `it expired at ${toWireTimeOrNull(expired)} (not after now, ${toWireTimeOrNull(now)}): created, it would never count` });
          continue;
        }
        const before = events.length;
        const r = await asManifestError(itemName(what, item), () => create(item as never));
        note(`${what} ${r.edge.id}`, r.created, before);
        if (!r.created && r.edge.revoked_at !== null) report.revoked.push(`${what} ${r.edge.id}`);
      }
    }
    return events;
  };
  if (options.dryRun) {
    // The same plan on the graph as it is, and nothing appended: what applying it now would do.
    const graph = await ctx.graph.current();
    const revision = graph.revision; // before the plan's awaits: the live graph moves on in place
    await plan(graph, ctx.clock.now());
    report.graph_revision = revision;
    return report;
  }
  // (Read into a local first: `report` is replaced by each planning, and `report.x = await …` would
  // assign into the one taken before the await.)
  const revision = await commitGraphChange(ctx, caller, plan);
  report.graph_revision = revision;
  return report;
}

/** What `writ graph export --format manifest` writes: the manifest, and the live edges it leaves out with why. */
export interface ManifestExport {
  manifest: GraphManifest;
  left_out: { id: string; why: string }[];
  /** Written as they are although a new graph would refuse them: part of their scope the policy does not have, the rest still counts. */
  as_they_are: { id: string; why: string }[];
}

/**
 * The graph as a manifest (`writ graph export --format manifest`), in the form `writ graph apply`
 * reads: its live principals (governance aside) with their keys inline, and the edges that would be
 * written again as they are — in the order they were created, so that a delegation comes after the
 * one it rests on — so that a graph built through the API can be kept in a file from then on. Applied
 * to the graph it came from it changes nothing; applied to an empty one it rebuilds it. A manifest
 * cannot say "revoked": what is revoked is not in it. Left out, and listed, are edges a rebuild would
 * refuse: expired ones, edges of a revoked principal, edges that count for nothing now (`writ orphans`:
 * a delegator that no longer holds what it gave, a scope the policy's registry does not cover), and
 * edges with a scope constraint a manifest cannot hold (other than risk_max). Who created each edge
 * is not in it either (an applied manifest's edges are governance's).
 */
export function manifestOf(ctx: WritContext, graph: AuthorityGraph, now: number): ManifestExport {
  const live = new Set(graph.principals().filter((p) => p.revoked_at === null).map((p) => p.id));
  const principals = graph.principals()
    .filter((p) => p.id !== GOVERNANCE_ID && live.has(p.id))
    .sort((a, b) => a.id.localeCompare(b.id))
    .map((p) => ({ id: p.id, kind: p.kind as PrincipalInput['kind'], priority_class: p.priority_class, ...(Object.keys(p.attributes).length > 0 ? { attributes: p.attributes } : {}), keys: p.keys }));
  const orphans = new Map<string, string>();
  const as_they_are: ManifestExport['as_they_are'] = [];
  for (const o of orphansIn(ctx, graph, now)) {
    // Part of its scope the policy does not have, the rest still counting (`[production, qa]`): written
    // as it is, so that the manifest applies to its own graph unchanged; a new graph refuses it, naming why.
    const registry = registryProblem(ctx.policy.data, o.edge);
    if (registry !== null && o.violations.length === 1 && scopeAppliesInPart(ctx.policy.data, o.edge.kind, o.edge.scope)) as_they_are.push({ id: o.edge.id, why: registry });
    else orphans.set(o.edge.id, o.violations[0] ?? 'it counts for nothing');
  }
  const left_out: ManifestExport['left_out'] = [];
  const edges = graph.edges()
    .filter((e) => e.revoked_at === null)
    .sort((a, b) => a.revision - b.revision || a.id.localeCompare(b.id))
    .filter((e) => {
      const revoked = principalEnds(e).find((p) => !live.has(p));
      const extra = Object.keys(e.scope.constraints).filter((k) => k !== 'risk_max');
      const why =
        revoked !== undefined ? `principal ${revoked} is revoked`
        : e.expires_at !== null && e.expires_at <= now ? `it expired at ${toWireTimeOrNull(e.expires_at)}`
        : orphans.has(e.id) ? `it counts for nothing now (writ orphans): ${orphans.get(e.id)}`
        : extra.length > 0 ? `its scope constraint ${extra.join(', ')} cannot be written in a manifest (only risk_max)`
        : null;
      if (why !== null) left_out.push({ id: e.id, why });
      return why === null;
    });
  const window = (e: Edge) => ({
    ...(e.not_before !== null ? { not_before: toWireTimeOrNull(e.not_before)! } : {}),
    ...(e.expires_at !== null ? { expires_at: toWireTimeOrNull(e.expires_at)! } : {}),
  });
  const scope = (e: Edge) => ({ actions: e.scope.actions, resources: e.scope.resources, environments: e.scope.environments, fields: e.scope.fields, risk_max: e.scope.constraints.risk_max });
  const of = (kind: Edge['kind']) => edges.filter((e) => e.kind === kind);
  return {
    manifest: {
      principals,
      grants: of('grant').map((e) => ({ id: e.id, to: e.to, reason: e.reason, max_depth: e.max_depth ?? 0, ...window(e), scope: scope(e) })),
      delegations: of('delegate').map((e) => ({ id: e.id, from: e.from, to: e.to, reason: e.reason, max_depth: e.max_depth ?? 0, ...window(e), scope: scope(e) })),
      ownerships: of('owns').map((e) => ({ id: e.id, owner: e.from, resource: e.scope.resources[0]!, fields: e.scope.fields, reason: e.reason, ...window(e) })),
      approvals: of('approves').map((e) => ({ id: e.id, from: e.from, to: e.to, reason: e.reason, ...window(e), scope: scope(e) })),
      preemptions: of('preempts').map((e) => ({ id: e.id, from: e.from, to: e.to, reason: e.reason, ...window(e) })),
    },
    left_out,
    as_they_are,
  };
}

/** manifestOf as YAML (no anchors: each list is written out where it is used), under comments saying where it came from and what it leaves out. */
export function manifestYaml(ctx: WritContext, graph: AuthorityGraph, now: number): string {
  const { manifest, left_out, as_they_are } = manifestOf(ctx, graph, now);
  const header = [
    `# Writ graph at revision ${graph.revision}, exported ${toWireTimeOrNull(now)} as a manifest (writ graph apply FILE).`,
    '# Revoked principals and edges are not in it.',
    ...(left_out.length > 0 ? ['# Left out, as a rebuild would refuse them:', ...left_out.map((x) => `#   ${x.id}: ${x.why}`)] : []),
    ...(as_they_are.length > 0
      ? ['# Written as they are (the rest of their scope still counts), but a new graph refuses them: edit them before rebuilding elsewhere:', ...as_they_are.map((x) => `#   ${x.id}: ${x.why}`)]
      : []),
  ];
  return `${header.map((l) => l.replace(/\n/g, ' ')).join('\n')}\n${stringify(manifest, { lineWidth: 0, aliasDuplicateObjects: false })}`;
}
