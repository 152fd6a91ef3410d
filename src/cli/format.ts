import type { Edge, Scope } from '../graph/model.js';
import { toWireTime } from '../wire/time.js';
import type { ApplyReport, Capability, EdgeImpact, Explanation, ImpactReport, PolicyImpactReport, PrincipalImpact, Revocation, WhyReport } from '../service/index.js';

/** Human-readable `writ trace` output: the verdict, then each candidate chain edge by edge. */
export function formatExplanation(x: Explanation): string {
  const r = x.request;
  const lines: string[] = [];
  lines.push(`${x.allow ? 'ALLOW' : 'DENY'}  ${x.principal} ${r.action} ${r.resource} in ${r.environment}${r.fields.length ? ` fields [${r.fields.join(', ')}]` : ' (whole resource)'}`);
  lines.push(`  risk ${x.risk}; class ${x.obligations.resource_class}; graph revision ${x.graph_revision}; policy ${x.policy_revision}`);
  const owners = Object.entries(x.owners).map(([f, o]) => `${f}: ${o ?? 'NONE'}`);
  if (owners.length) lines.push(`  owners: ${owners.join(', ')}`);
  const obligations = (['lease_required', 'version_required', 'approval_required'] as const).filter((k) => x.obligations[k]);
  if (obligations.length) lines.push(`  obligations: ${obligations.join(', ')}`);
  for (const reason of x.reasons) lines.push(`  reason: ${reason}`);
  if (x.chains.length === 0) lines.push('  no candidate chain from governance');
  x.chains.forEach((c, i) => {
    lines.push(`  chain ${i}: ${c.verdict.ok ? 'valid' : 'invalid'}`);
    c.edges.forEach((e, j) => {
      const v = c.verdict.edges[j];
      const scope = `${e.scope.actions.join(',')} on ${e.scope.resources.join(',')} env ${e.scope.environments.join(',')} fields ${e.scope.fields.join(',')} risk≤${e.scope.constraints.risk_max}`;
      lines.push(`    ${v?.ok ? '✓' : '✗'} ${e.id}: ${e.from} → ${e.to} [${e.kind}] ${scope}${e.max_depth !== null ? ` depth ${e.max_depth}` : ''}`);
      lines.push(`        by ${e.creator} at ${toWireTime(e.created_at)}: ${e.reason}`);
      for (const p of v?.problems ?? []) lines.push(`        problem: ${p}`);
    });
    for (const p of c.verdict.problems) lines.push(`    problem: ${p}`);
  });
  return lines.join('\n');
}

const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? '—' : toWireTime(ms));

function scopeLine(s: Scope): string {
  return `${s.actions.join(',')} on ${s.resources.join(',')} in ${s.environments.join(',')} fields [${s.fields.join(', ')}] risk≤${s.constraints.risk_max}`;
}

/** `3 created, 1 updated, 20 unchanged` of a manifest's application (`updated`, the revoked among the unchanged and the skipped only when there are some). */
export function applyCounts(r: ApplyReport): string {
  return `${r.created.length} created, ${r.updated.length > 0 ? `${r.updated.length} updated, ` : ''}${r.unchanged.length} unchanged${r.revoked.length > 0 ? ` (${r.revoked.length} of them revoked, and left so: ${r.revoked.join(', ')})` : ''}${r.skipped.length > 0 ? `, ${r.skipped.length} expired edge(s) skipped` : ''}`;
}

function revocationLine(r: Revocation): string {
  return `at ${iso(r.revoked_at)}${r.graph_revision === null ? '' : ` (graph revision ${r.graph_revision})`}${r.revoked_by === null ? '' : ` by ${r.revoked_by}`}${r.reason === null ? '' : `: "${r.reason}"`}`;
}

/** `writ why`: the receipt, the decision it rests on, and the chain edge by edge. */
export function formatWhy(r: WhyReport): string {
  const x = r.receipt;
  const lines = [
    `receipt ${x.receipt_id}: ${x.status}${x.reconciled ? ' (reconciled after a crash or timeout)' : ''}`,
    `  ${x.principal} ${x.action} ${x.resource_key} fields [${x.fields.join(', ')}] at ${iso(x.created_at)}`,
    `  versions: expected ${x.expected_version ?? '—'} → final ${x.final_version ?? '—'}; upstream status ${x.upstream_status ?? '—'}`,
  ];
  if (x.error) lines.push(`  error: ${x.error.code}: ${x.error.message}`);
  for (const c of x.conflicts) lines.push(`  conflict: ${c.kind} expected ${String(c.expected)} actual ${String(c.actual)}`);
  lines.push(`  lease ${x.lease_id ?? '—'} at fencing epoch ${x.lease_epoch ?? '—'}`);
  const p = x.presented_lease;
  if (p) {
    lines.push(`  lease presented: ${p.lease_id ?? 'none'}${p.token_lease_id !== null && p.token_lease_id !== p.lease_id ? ` (the token names ${p.token_lease_id})` : ''}`);
    for (const k of p.keys) {
      const held = k.state === 'FREE' ? 'free' : `${k.state === 'HELD' ? 'held' : 'expired'} by ${k.holder ?? '—'} (lease ${k.lease_id ?? '—'})`;
      lines.push(`    ${k.key}: fencing epoch presented ${k.presented_epoch ?? 'none'}, current ${k.current_epoch}; ${held} at the refusal`);
    }
  }
  lines.push(`  owners: ${x.owners.join(', ') || '—'}`);
  lines.push(`decision ${x.decision_id ?? '—'}: policy ${x.policy_revision ?? '—'}, graph revision ${x.graph_revision ?? '—'}`);
  if (r.chain.length === 0) lines.push('  (no chain: the request was refused before a decision was accepted)');
  r.chain.forEach((link, i) => {
    const e = link.edge;
    lines.push(`  ${i + 1}. ${e.id}: ${e.from} → ${e.to} [${e.kind}]${e.max_depth !== null ? ` depth ${e.max_depth}` : ''}`);
    const window = e.not_before === null && e.expires_at === null ? 'no time limit' : `valid from ${iso(e.not_before)} until ${iso(e.expires_at)}`;
    lines.push(`       scope: ${scopeLine(e.scope)}; ${window}`);
    lines.push(`       created by ${e.creator} at ${iso(e.created_at)}: "${e.reason}"`);
    if (link.now) lines.push(`       REVOKED since: ${revocationLine(link.now)}`);
  });
  for (const p of r.principals_revoked) lines.push(`  principal ${p.principal} REVOKED since: ${revocationLine(p)}`);
  lines.push(`hash ${x.hash} (prev ${x.prev_hash})`);
  return lines.join('\n');
}

/** Denied only for want of an approval: a valid chain, and every reason an approval's (the policy says so). */
export function withApproval(x: Explanation): boolean {
  return !x.allow && x.approval_missing;
}

/**
 * `writ who`: the principals allowed, each with the chain that allows it and what it still needs; one
 * the policy denies only for want of an approval is allowed with one, and said so. With `all`, the
 * denied too, each with its most telling reason (a chain's, before an approval's).
 */
export function formatWho(q: { action: string; resource: string; environment: string; fields: string[] }, answers: Explanation[], all: boolean): string {
  const allowed = answers.filter((x) => x.allow || withApproval(x));
  const first = answers[0];
  const lines = [
    `who may ${q.action} ${q.resource} in ${q.environment}${q.fields.length ? ` fields [${q.fields.join(', ')}]` : ''}: ${allowed.length} of ${answers.length} live principal(s)${first ? ` (graph revision ${first.graph_revision}, policy ${first.policy_revision})` : ''}`,
  ];
  // Nobody allowed: what denies every one of them (an action not in the catalogue, a resource no one
  // owns) is said once, instead of an empty list that reads like a graph without such authority.
  if (!all && allowed.length === 0 && first) {
    for (const r of first.reasons.filter((r) => answers.every((x) => x.reasons.includes(r)))) lines.push(`  every one denied: ${r}`);
  }
  for (const x of all ? answers : allowed) {
    const yes = x.allow || withApproval(x);
    const chain = x.chains.find((c) => c.verdict.ok) ?? x.chains[0];
    const via = chain ? `via ${chain.edges.map((e) => e.id).join(' → ')}` : 'no chain';
    const needs = yes ? [x.obligations.lease_required ? 'a lease' : null, x.obligations.approval_required ? 'an approval' : null].filter(Boolean) : [];
    const why = x.reasons.find((r) => !r.startsWith('approval')) ?? x.reasons[0] ?? '';
    lines.push(`  ${yes ? 'ALLOW' : 'deny '} ${x.principal.padEnd(24)} ${yes ? via : why}${needs.length ? `  (needs ${needs.join(' and ')})` : ''}`);
  }
  return lines.join('\n');
}

export function formatCapabilities(principal: string, c: { at: number; graph_revision: number; capabilities: Capability[]; truncated: boolean }): string {
  const lines = [`${principal} at ${iso(c.at)} (graph revision ${c.graph_revision}):`];
  if (c.capabilities.length === 0 && !c.truncated) lines.push('  nothing: no chain from governance');
  for (const cap of c.capabilities) {
    lines.push(`  ${cap.valid ? 'CAN ' : 'not '} ${scopeLine(cap.scope)}`);
    lines.push(`       via ${cap.chain.map((e) => e.id).join(' → ')}  (${['governance', ...cap.chain.map((e) => e.to)].join(' → ')})`);
    for (const p of cap.problems) lines.push(`       because: ${p}`);
  }
  if (c.truncated) lines.push(`  TRUNCATED: ${principal} may hold more than this: it has more chains than Writ judges for one principal`);
  return lines.join('\n');
}

export function formatEdgeList(edges: Edge[], note: (e: Edge) => string): string {
  if (edges.length === 0) return '(none)';
  return edges.map((e) => `${e.id}: ${e.from} → ${e.to} [${e.kind}] ${note(e)}`).join('\n');
}

function describeChange(r: ImpactReport): string {
  if (r.change.revoke?.edge !== undefined) return `revoking edge ${r.change.revoke.edge}`;
  if (r.change.revoke?.principal !== undefined) return `revoking principal ${r.change.revoke.principal}`;
  const d = r.change.delegate!;
  return `delegating ${d.from} → ${d.to}`;
}

function formatPrincipalImpacts(title: string, list: PrincipalImpact[]): string[] {
  if (list.length === 0) return [`${title}: (none)`];
  const out = [`${title}:`];
  for (const p of list) {
    out.push(`  ${p.principal}`);
    for (const c of p.capabilities) {
      out.push(`    ${c.action} on ${c.resource} in ${c.environment}, fields [${c.fields.join(', ')}]   via ${c.via.map((v) => v.join(' > ')).join(' | ')}`);
    }
  }
  return out;
}

/** `writ impact`: what a change would do, in words an auditor reads before making it. */
export function formatImpact(r: ImpactReport, done?: { header: string }): string {
  // `done`: the change was made (writ revoke), so the report says what it did, not what it would do.
  const would = (what: string, did: string) => (done ? did : what);
  const lines = [done?.header ?? `impact of ${describeChange(r)} at graph revision ${r.graph_revision} (computed on a copy; nothing changed; ${r.principals_examined} principal(s) examined)`];
  if (!r.exact) lines.push(`NOT EXACT: what ${r.inexact_principals.join(', ')} ${would('would lose or gain', 'lost or gained')} is not fully known (more chains than Writ judges for one principal)`);
  if (r.through_change_only.length > 0) lines.push(`ONLY THROUGH THE CHANGE'S OWN EDGES: what ${r.through_change_only.join(', ')} ${would('would lose or gain', 'lost or gained')} counts only the chains ending in the edges the change makes or ends, whatever else they hold (audit_read on them shows it all)`);
  lines.push(...formatPrincipalImpacts(would('would lose', 'lost'), r.lost));
  if (r.change.delegate || r.gained.length > 0) lines.push(...formatPrincipalImpacts(would('would gain', 'gained'), r.gained));
  lines.push(r.leases_ending.length === 0 ? 'leases ending at their next renewal: (none)' : 'leases ending at their next renewal:');
  for (const l of r.leases_ending) lines.push(`  ${l.lease_id} held by ${l.holder} on ${l.keys.join(', ')}: ${l.code}: ${l.reason}`);
  const edges = (title: string, list: EdgeImpact[]) => {
    lines.push(list.length === 0 ? `${title}: (none)` : `${title}:`);
    for (const e of list) lines.push(`  ${e.edge.id}: ${e.edge.from} → ${e.edge.to} [${e.edge.kind}]`, ...e.reasons.map((x) => `      ${x}`));
  };
  edges(would('delegations that would become orphans', 'delegations that became orphans'), r.orphaned_delegations);
  if (r.healed_delegations.length > 0) edges(would('orphaned delegations that would hold again', 'orphaned delegations that hold again'), r.healed_delegations);
  edges(would('approvals that would die', 'approvals that died'), r.approvals_ending);
  return lines.join('\n');
}

/** `writ policy impact`: the decisions a candidate bundle would decide otherwise. */
export function formatPolicyImpact(r: PolicyImpactReport, bundleDir: string): string {
  const lines = [
    `policy impact of bundle ${r.candidate_revision} (against ${r.current_revision}, the live bundle of ${bundleDir}); ${r.replayed} decision(s) replayed from the ${r.source === 'decision_log' ? 'decision log' : 'receipts'}; nothing changed`,
  ];
  const latest = r.latest_recorded;
  if (latest !== null && latest.revision !== r.current_revision) {
    lines.push(`WARNING: the latest decision read (${latest.decision_id} at ${toWireTime(latest.at)}) was made under policy ${latest.revision}, not ${r.current_revision}: the service may not run the bundle of ${bundleDir} (a rebuild it refused shows in its GET /readyz as policy_refused); what follows compares the candidate with ${r.current_revision}`);
  }
  if (r.replayed === 0) {
    lines.push(`WARNING: no decision was replayed${r.skipped.length > 0 ? '' : ` (none in the ${r.source === 'decision_log' ? 'decision log' : 'receipts'})`}: no verdict was checked, only the registry (stranded edges)`);
  }
  lines.push(r.flips.length === 0 ? `no ${r.replayed === 0 ? 'replayed ' : ''}decision would flip` : `${r.flips.length} decision(s) would flip:`);
  for (const f of r.flips) {
    const q = f.request;
    lines.push(`  ${f.flip.toUpperCase()}  ${f.decision_id}${f.receipt_id ? ` (receipt ${f.receipt_id})` : ''} at ${toWireTime(f.at)}, graph revision ${f.graph_revision}`);
    lines.push(`      ${q.principal} ${q.action} ${q.resource} in ${q.environment}${q.fields.length ? ` fields [${q.fields.join(', ')}]` : ''}`);
    for (const reason of f.reasons) lines.push(`      ${reason}`);
  }
  if (r.failures.length > 0) {
    const codes = [...new Set(r.failures.map((f) => f.code))].join(' or ');
    lines.push(`${r.failures.length} decision(s) the candidate fails on (it would answer them ${codes}):`);
    for (const f of r.failures) {
      const q = f.request;
      lines.push(`  ${f.current ? 'ALLOW' : 'DENY'}→${f.code === 'INTERNAL' ? 'ERROR' : f.code}  ${f.decision_id}${f.receipt_id ? ` (receipt ${f.receipt_id})` : ''} at ${toWireTime(f.at)}, graph revision ${f.graph_revision}`);
      lines.push(`      ${q.principal} ${q.action} ${q.resource} in ${q.environment}${q.fields.length ? ` fields [${q.fields.join(', ')}]` : ''}`);
      lines.push(`      ${f.error}`);
    }
  }
  if (r.stranded_edges.length > 0) {
    lines.push(`${r.stranded_edges.length} live edge(s) the candidate's registry would no longer cover in full (they would stay in the graph):`);
    for (const e of r.stranded_edges) {
      lines.push(`  ${e.edge_id} (${e.kind} ${e.from} → ${e.to}) ${e.counts_in_part ? 'would count only for the rest of its scope' : 'would never count again'}: ${e.problem}`);
    }
  }
  if (r.not_reproduced.length > 0) lines.push(`${r.not_reproduced.length} recorded decision(s) decide otherwise under the running bundle too (recorded with another bundle?): ${r.not_reproduced.map((n) => n.decision_id).join(', ')}`);
  if (r.skipped.length > 0) lines.push(`${r.skipped.length} decision(s) not replayed, so not checked:`, ...r.skipped.map((s) => `  ${s.decision_id ?? '(no id)'}: ${s.reason}`));
  return lines.join('\n');
}
