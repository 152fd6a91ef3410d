import type { Explanation } from '../service/index.js';

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
      lines.push(`        by ${e.creator} at ${new Date(e.created_at).toISOString()}: ${e.reason}`);
      for (const p of v?.problems ?? []) lines.push(`        problem: ${p}`);
    });
    for (const p of c.verdict.problems) lines.push(`    problem: ${p}`);
  });
  return lines.join('\n');
}
