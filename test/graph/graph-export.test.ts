import { describe, expect, it } from 'vitest';
import { AuthorityGraph, exportChainDot, exportChainMermaid, exportGraphDot, exportGraphJson, resolveChains } from '../../src/graph/index.js';
import { EventLogBuilder, REQUEST, T0 } from './graph-events.js';

function log(): EventLogBuilder {
  return new EventLogBuilder()
    .principal('governance', 'governance')
    .principal('orchestrator', 'service')
    .principal('seo-agent-7')
    .principal('seo-control-plane', 'control_plane')
    .edge('g1', 'grant', 'governance', 'orchestrator', { fields: ['title', 'meta_description'] })
    .edge('d1', 'delegate', 'orchestrator', 'seo-agent-7', { fields: ['title'] })
    .edge('o1', 'owns', 'seo-control-plane', 'wp:post:*', { resources: ['wp:post:*'], fields: ['title'] })
    .revokeEdge('d1', T0 + 3_600_000);
}

describe('graph export', () => {
  it('lists principals and edges by id with their times (ms; the wire renders them), as of the replayed revision', () => {
    const events = log().events;
    const now = exportGraphJson(AuthorityGraph.replay(events));
    expect(now.revision).toBe(8);
    expect(now.edges.map((e) => e.id)).toEqual(['d1', 'g1', 'o1']);
    expect(now.edges[0]!.revoked_at).toBe(T0 + 3_600_000);
    expect(now.principals[0]!.created_at).toBe(T0);

    const before = exportGraphJson(AuthorityGraph.replay(events, { upTo: 5 }));
    expect(before.revision).toBe(5);
    expect(before.edges.map((e) => e.id)).toEqual(['g1']);
    expect(JSON.parse(JSON.stringify(before))).toEqual(before);
  });

  it('DOT has every edge, revoked ones dashed gray, highlighted ones red', () => {
    const dot = exportGraphDot(AuthorityGraph.replay(log().events), { highlightEdges: ['g1'] });
    expect(dot).toMatch(/^digraph writ \{/);
    expect(dot).toContain('"governance" -> "orchestrator" [label="grant g1\\nupdate_post @ wp:post:* in production [title,meta_description] risk ≤ 5 depth 6", color=red, penwidth=2];');
    expect(dot).toMatch(/"orchestrator" -> "seo-agent-7" \[label="delegate d1.*", style=dashed, color=gray/);
    expect(dot).toContain('"seo-control-plane" -> "state:wp:post:*"');
    expect(dot).toContain('"state:wp:post:*" [label="wp:post:*", shape=folder];');
  });

  it('an approves edge is labelled with what it may approve: actions, resources, environments and the highest risk (risk_max)', () => {
    const g = AuthorityGraph.replay(log().principal('editor-alice', 'human').edge('a1', 'approves', 'editor-alice', 'seo-agent-7', { fields: ['*'], constraints: { risk_max: 3 } }).events);
    expect(exportGraphDot(g)).toContain('"editor-alice" -> "seo-agent-7" [label="approves a1\\nupdate_post @ wp:post:* in production risk ≤ 3"');
  });

  it('chains export to DOT and Mermaid for incident reports', () => {
    const g = AuthorityGraph.replay(log().events);
    const [chain] = resolveChains(g, REQUEST, T0, { mode: 'explain' });
    const mermaid = exportChainMermaid(chain!.edges);
    expect(mermaid.split('\n').slice(0, 5)).toEqual([
      'flowchart LR',
      '  n0["governance"]',
      '  n1["orchestrator"]',
      '  n0 -->|"grant g1: update_post @ wp:post:* in production [title,meta_description] risk ≤ 5 depth 6"| n1',
      '  n2["seo-agent-7"]',
    ]);
    expect(mermaid).toContain('n1 -.->|"delegate d1: update_post @ wp:post:* in production [title] risk ≤ 5 depth 5 (revoked)"| n2');
    const dot = exportChainDot(chain!.edges);
    expect(dot).toContain('"governance" -> "orchestrator"');
    expect(dot).toContain('"orchestrator" -> "seo-agent-7"');
  });
});
