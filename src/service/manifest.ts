import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse } from 'yaml';
import { WritError } from '../errors.js';
import type { AuthorityGraph } from '../graph/index.js';
import { dottedPath, schemaChecker } from '../json-schema.js';
import type { EdgeKind, PublicJwk } from '../graph/model.js';
import type { WritContext } from './context.js';
import { createApproval, createDelegation, createGrant, createOwnership, createPreemption, ownershipScope, type ApprovalInput, type DelegationInput, type GrantInput, type OwnershipInput, type PreemptionInput } from './edges.js';
import { registerPrincipal, type PrincipalInput } from './principals.js';
import { checkScopeApplies } from './resources.js';
import { normalizeScope, publicPart, type ScopeInput } from './validate.js';
import { approvalBody, delegationBody, grantBody, ownershipBody, preemptionBody, principalBody } from '../wire/graph-bodies.js';

/**
 * A declarative graph definition (graph/*.yaml), applied idempotently like a manifest: objects are
 * identified by id; an identical object is left alone, a different one with the same id is refused.
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
  unchanged: string[];
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

/** Names the manifest item in every error, and turns a malformed item (a missing scope, a wrong type) into MALFORMED_REQUEST. */
/** How a manifest item is named in errors: its section's word and its id. */
function itemName(what: string, item: unknown): string {
  return `${what} ${(item as { id?: unknown } | null)?.id ?? '(no id)'}`;
}

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

/** Applies a manifest as `caller` (governance). Order: principals, grants, delegations (file order), ownerships, approvals, preemptions. */
export async function applyManifest(ctx: WritContext, caller: string, manifest: GraphManifest, baseDir: string): Promise<ApplyReport> {
  await checkBeforeApplying(ctx, manifest, baseDir, await ctx.graph.current());
  const report: ApplyReport = { created: [], unchanged: [], graph_revision: (await ctx.graph.current()).revision };
  const note = (what: string, created: boolean, revision: number) => {
    (created ? report.created : report.unchanged).push(what);
    report.graph_revision = revision;
  };
  for (const p of manifest.principals ?? []) {
    const r = await asManifestError(itemName('principal', p), () => {
      const keys = [...(p.keys ?? []), ...(p.key_files ?? []).map((f) => readKeyFile(resolve(baseDir, f)))];
      const { key_files: _kf, ...rest } = p;
      return registerPrincipal(ctx, caller, { ...rest, keys });
    });
    note(`principal ${p.id}`, r.created, r.graph_revision);
  }
  const edgeSections: [string, unknown[] | undefined, (input: never) => Promise<{ created: boolean; graph_revision: number; edge: { id: string } }>][] = [
    ['grant', manifest.grants, (i) => createGrant(ctx, caller, i)],
    ['delegation', manifest.delegations, (i) => createDelegation(ctx, caller, i)],
    ['ownership', manifest.ownerships, (i) => createOwnership(ctx, caller, i)],
    ['approval', manifest.approvals, (i) => createApproval(ctx, caller, i)],
    ['preemption', manifest.preemptions, (i) => createPreemption(ctx, caller, i)],
  ];
  for (const [what, items, create] of edgeSections) {
    for (const item of items ?? []) {
      const r = await asManifestError(itemName(what, item), () => create(item as never));
      note(`${what} ${r.edge.id}`, r.created, r.graph_revision);
    }
  }
  return report;
}

/**
 * What can be known about every item without the graph, checked before the first item is written: a key
 * file that cannot be read, a scope that is malformed or could never apply (checkScopeApplies). Items are
 * applied one by one (each its own graph event, as through the API), so without this a typo in the last
 * item would leave the ones before it applied; now it changes nothing. What depends on the graph (an
 * unknown principal, a delegation wider than its delegator holds) is still found as each item is applied.
 * An edge whose id the graph holds already is left to the apply (unchanged if identical, else
 * ALREADY_EXISTS), as edges written before a check existed must not stop a manifest from re-applying.
 */
async function checkBeforeApplying(ctx: WritContext, manifest: GraphManifest, baseDir: string, graph: AuthorityGraph): Promise<void> {
  checkManifestShape(manifest);
  for (const p of manifest.principals ?? []) await asManifestError(itemName('principal', p), () => (p.key_files ?? []).forEach((f) => readKeyFile(resolve(baseDir, f))));
  const scoped: [string, EdgeKind, { scope: ScopeInput }[] | undefined][] = [
    ['grant', 'grant', manifest.grants],
    ['delegation', 'delegate', manifest.delegations],
    ['approval', 'approves', manifest.approvals],
  ];
  const exists = (item: unknown) => typeof (item as { id?: unknown } | null)?.id === 'string' && graph.edge((item as { id: string }).id) !== undefined;
  for (const [what, kind, items] of scoped) {
    for (const item of items ?? []) if (!exists(item)) await asManifestError(itemName(what, item), () => checkScopeApplies(ctx.policy.data, kind, normalizeScope(item.scope)));
  }
  for (const item of manifest.ownerships ?? []) {
    if (!exists(item)) await asManifestError(itemName('ownership', item), () => checkScopeApplies(ctx.policy.data, 'owns', ownershipScope(item)));
  }
}
