/**
 * The contract between the TypeScript side and the Rego policy (policies/). TypeScript collects
 * candidates (graph traversal, owner lookup, verified approvals); Rego judges them. The attenuation
 * rules live only in Rego: write-time checks of a new delegation ask the policy too (entrypoint
 * `writ/authz/delegation`), so the rules cannot drift between write time and decision time.
 */
import type { CandidateChain, OwnerResolution, PolicyEdge, PolicyPrincipal } from '../graph/policy-view.js';
import type { ChainVerdict, Obligations } from '../wire/v1.js';

// The graph builds these for the policy; they are part of this contract too.
export type { CandidateChain, OwnerResolution, PolicyEdge, PolicyPrincipal };

export interface VerifiedApproval {
  /** The approving principal (its assertion was verified by the service before the policy runs). */
  by: string;
  /** Live `approves` edges from `by` to the requester (the policy checks their scope and risk). */
  edges: PolicyEdge[];
}

/** input for `writ/authz/decision` */
export interface DecisionInput {
  now: number;
  request: {
    principal: string;
    action: string;
    resource: string;
    environment: string;
    /** Requested fields; empty means the whole resource (only a scope with fields ['*'] covers it). */
    fields: string[];
    /** Optional extra risk the caller declares (can only raise the action's catalogue risk). */
    risk: number | null;
  };
  /** Every principal that appears in any candidate chain, plus the caller, for liveness checks. */
  principals: Record<string, PolicyPrincipal>;
  /** Ordered by preference (shorter first); the policy picks the first valid one. */
  chains: CandidateChain[];
  owners: OwnerResolution[];
  approval: VerifiedApproval | null;
  /**
   * What the caller said about the subject, the resource and the action (AuthZEN `properties`), for
   * domain rules written on top of chain authority; `{}` each when nothing was said. These are the
   * caller's claims, not facts Writ checked: a rule over them is as trustworthy as the caller.
   */
  properties?: RequestProperties;
  /** The request's context (AuthZEN `context`, or the /v1 `context`) without the approval assertion. */
  context?: Record<string, unknown>;
}

export interface RequestProperties {
  subject: Record<string, unknown>;
  resource: Record<string, unknown>;
  action: Record<string, unknown>;
}

/** The obligations and a chain's verdict are wire types (the SDK reads them in decisions and explanations): defined once, in src/wire. */
export type { ChainVerdict, Obligations } from '../wire/v1.js';

/** result of `writ/authz/decision` */
export interface DecisionResult {
  allow: boolean;
  /** Sorted, human-readable; empty when allowed. What is missing, in words an auditor can act on. */
  reasons: string[];
  /**
   * Denied only for want of an approval (a valid chain; every reason is the approval's): an approval
   * would allow it. False when allowed. A policy whose entrypoint lacks it reads as false.
   */
  approval_missing: boolean;
  obligations: Obligations;
  /** Index into input.chains of the chain that allows, or null. */
  chain_index: number | null;
  risk: number;
  chains: ChainVerdict[];
}

/** input for `writ/authz/delegation`: may `proposed` (a delegate edge from the delegator) be written? */
export interface DelegationInput {
  now: number;
  proposed: PolicyEdge;
  principals: Record<string, PolicyPrincipal>;
  /** Candidate chains from governance to the delegator (proposed.from). */
  chains: CandidateChain[];
}

export interface DelegationResult {
  allow: boolean;
  /**
   * When refused: the violations against the parent chain that came closest, one line per exceeding
   * dimension, each starting with the dimension name: `fields: body is not in the delegator's [meta_description, title]`.
   * Dimensions: actions, resources, environments, fields, risk, time window, depth; plus `chain:` lines
   * when the delegator holds no valid chain at all.
   */
  violations: string[];
  chain_index: number | null;
}

/** What a service that follows its bundle folder has done with rebuilt bundles (reloading-engine.ts). */
export interface PolicyReloads {
  /** Rebuilt bundles swapped in since the service started. */
  taken: number;
  /** Attempts to load a rebuilt bundle that kept the live one (it did not load, its data is unusable, or it failed on recent inputs); a bundle tried again is counted again, except one that could not be read, which is looked at again on use until it reads (a folder still being copied in) and counted once, whatever each look finds missing or truncated. */
  refused: number;
  /** The latest refusal, until a rebuilt bundle is taken or the live one is named again: the revision the folder named (null when none could be read), why (for a bundle that could not be read, what the latest look found) and when it was first refused. */
  last_refused: { revision: string | null; reason: string; at: number } | null;
}

/** A loaded, evaluable policy bundle. */
export interface PolicyEngine {
  /** Hash of the bundle (policy.wasm + data.json) the engine is using now. */
  readonly revision: string;
  /** The static policy data (action catalogue, resource classes, ...) of the current bundle. */
  readonly data: PolicyData;
  decide(input: DecisionInput): DecisionResult;
  checkDelegation(input: DelegationInput): DelegationResult;
  /** An engine that follows a bundle folder says what it did with rebuilt bundles; a fixed one has none. */
  reloads?(): PolicyReloads;
}

export interface ResourceClassRule {
  /** Resource pattern (segment-wise, as in scopes). The most specific matching rule applies. */
  pattern: string;
  class: 'READ_SHARED' | 'WRITE_OPTIMISTIC' | 'WRITE_EXCLUSIVE' | 'MULTI_WRITER_MERGEABLE';
  /** Managed state: writes need a resolved owner. */
  managed: boolean;
  /** Per-field semantics overriding `class` for those fields. */
  fields?: Record<string, ResourceClassRule['class']>;
  /**
   * The rule's keys have no fields but `fields`: the policy denies a request naming another, and a scope
   * naming a field no class it reaches has is refused (a misspelt `titel` would otherwise take `class`).
   */
  fields_closed?: boolean;
  conflict_domain?: string;
  /** Per-field conflict domains (e.g. a post's `canonical` field is in SEO_METADATA); used when `conflict_domain` is unset. */
  field_conflict_domains?: Record<string, string>;
  /** Which scope of the conflict domain a key is in: one of its segments (0-based), or a fixed value. */
  conflict_scope?: { segment: number; value?: never } | { value: string; segment?: never };
  /**
   * The segments (0-based) of the rule's keys that are host names, read without case (DNS): a key
   * spelling one in capitals is refused, and so is a graph pattern that does (it would match no key).
   */
  host_segments?: number[];
  description?: string;
}

export interface PolicyData {
  writ: {
    actions: Record<string, { risk: number; description?: string; write: boolean }>;
    resource_classes: ResourceClassRule[];
    /** Per environment: requests with risk above this need an approval. */
    approval_threshold: Record<string, number>;
    /**
     * The environments there are. When given, a scope, a decision request or an approval threshold
     * naming another is refused (a misspelt `prodution` would otherwise grant nothing, be asked about
     * in vain, or never ask for an approval); without it any name is taken as written.
     */
    environments?: string[];
    /** Coordination registry aliases: a key starting with `from` segments is rewritten to `to` (e.g. wordpress:article → wp:post). */
    aliases?: { from: string; to: string }[];
    /** The conflict domains resource classes may name (`conflict_domain`, `field_conflict_domains`). */
    conflict_domains?: Record<string, { description?: string }>;
    /** Settings of the domain rules (policies/writ/authz/domain), free-form. */
    domain_rules?: Record<string, unknown>;
  };
}
