import type { PolicyEdge } from './policy-view.js';
import { isPrincipalNode, managedStateNodeId, type AuthorityGraph, type GraphNode } from './authority-graph.js';
import type { Edge, Principal } from './model.js';

export interface GraphExport {
  revision: number;
  principals: Principal[];
  edges: Edge[];
}

/** The graph for the API and audits: principals and edges sorted by id (times in ms; the wire shows them RFC 3339). */
export function exportGraphJson(graph: AuthorityGraph): GraphExport {
  return { revision: graph.revision, principals: graph.principals().map((p) => ({ ...p })).sort(byId), edges: graph.edges().map((e) => ({ ...e })).sort(byId) };
}

export interface DotOptions {
  /** Edge ids drawn bold red (e.g. the chain of a decision). */
  highlightEdges?: Iterable<string>;
}

/** The whole graph in Graphviz DOT. Revoked edges and principals are dashed gray. */
export function exportGraphDot(graph: AuthorityGraph, options: DotOptions = {}): string {
  const lines = [`digraph writ {`, `  label=${q(`graph revision ${graph.revision}`)};`, ...DOT_DEFAULTS];
  const nodes: [string, GraphNode][] = [];
  graph.forEachNode((id, node) => nodes.push([id, node]));
  nodes.sort((a, b) => compare(a[0], b[0]));
  for (const [id, node] of nodes) lines.push(`  ${dotNode(id, node)}`);
  const highlight = new Set(options.highlightEdges ?? []);
  for (const edge of graph.edges().sort(byId)) lines.push(`  ${dotEdge(edge, targetId(edge), highlight.has(edge.id))}`);
  lines.push('}');
  return lines.join('\n') + '\n';
}

/** One chain (edges from governance to the requester) in Graphviz DOT, for incident reports. */
export function exportChainDot(edges: readonly PolicyEdge[], options: DotOptions = {}): string {
  const lines = ['digraph chain {', ...DOT_DEFAULTS];
  const highlight = new Set(options.highlightEdges ?? []);
  const seen = new Set<string>();
  for (const e of edges) {
    for (const id of [e.from, targetId(e)]) {
      if (!seen.has(id)) {
        seen.add(id);
        lines.push(`  ${q(id)} [label=${q(id)}];`);
      }
    }
  }
  for (const e of edges) lines.push(`  ${dotEdge(e, targetId(e), highlight.has(e.id))}`);
  lines.push('}');
  return lines.join('\n') + '\n';
}

/** One chain as a Mermaid flowchart, for incident reports in Markdown. Revoked edges are dotted. */
export function exportChainMermaid(edges: readonly PolicyEdge[]): string {
  const ids = new Map<string, string>();
  const lines = ['flowchart LR'];
  const nodeOf = (id: string): string => {
    let n = ids.get(id);
    if (n === undefined) {
      n = `n${ids.size}`;
      ids.set(id, n);
      lines.push(`  ${n}["${mermaidText(id)}"]`);
    }
    return n;
  };
  for (const e of edges) {
    const from = nodeOf(e.from);
    const to = nodeOf(targetId(e));
    const arrow = e.revoked_at === null ? '-->' : '-.->';
    const label = `${e.kind} ${e.id}: ${shortScope(e)}${e.revoked_at === null ? '' : ' (revoked)'}`;
    lines.push(`  ${from} ${arrow}|"${mermaidText(label)}"| ${to}`);
  }
  return lines.join('\n') + '\n';
}

/** A one-line summary of an edge's scope: `actions @ resources in environments [fields]`. */
export function shortScope(edge: Pick<Edge, 'kind' | 'scope' | 'max_depth'>): string {
  const s = edge.scope;
  switch (edge.kind) {
    case 'owns':
      return `${list(s.resources)} [${list(s.fields)}]`;
    case 'approves':
      return `${list(s.actions)} @ ${list(s.resources)} in ${list(s.environments)} risk ≤ ${s.constraints.risk_max}`;
    case 'preempts':
      return 'preempts';
    default: {
      const depth = edge.max_depth === null ? '' : ` depth ${edge.max_depth}`;
      return `${list(s.actions)} @ ${list(s.resources)} in ${list(s.environments)} [${list(s.fields)}] risk ≤ ${s.constraints.risk_max}${depth}`;
    }
  }
}

const DOT_DEFAULTS = ['  rankdir=LR;', '  node [shape=box, fontname="Helvetica"];', '  edge [fontname="Helvetica", fontsize=10];'];

function dotNode(id: string, node: GraphNode): string {
  if (!isPrincipalNode(node)) {
    const shape = node.node === 'managed_state' ? 'folder' : 'hexagon';
    const label = node.node === 'managed_state' ? node.pattern : `class ${node.name}`;
    return `${q(id)} [label=${q(label)}, shape=${shape}];`;
  }
  const shape = node.kind === 'governance' ? ', shape=doubleoctagon' : '';
  const revoked = node.revoked_at === null ? '' : ', style=dashed, color=gray, fontcolor=gray';
  return `${q(id)} [label=${q(`${id}\n${node.kind} · ${node.priority_class}`)}${shape}${revoked}];`;
}

function dotEdge(e: PolicyEdge, to: string, highlighted: boolean): string {
  const attrs = [`label=${q(`${e.kind} ${e.id}\n${shortScope(e)}`)}`];
  if (e.revoked_at !== null) attrs.push('style=dashed', 'color=gray', 'fontcolor=gray');
  if (highlighted) attrs.push('color=red', 'penwidth=2');
  return `${q(e.from)} -> ${q(to)} [${attrs.join(', ')}];`;
}

/** The node an edge points at in the graph (owns edges point at their managed state). */
function targetId(e: Pick<Edge, 'kind' | 'to'>): string {
  return e.kind === 'owns' ? managedStateNodeId(e.to) : e.to;
}

function list(values: readonly string[], max = 3): string {
  if (values.length <= max) return values.join(',');
  return `${values.slice(0, max).join(',')},+${values.length - max}`;
}

function q(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
}

function mermaidText(text: string): string {
  return text.replace(/"/g, '#quot;').replace(/\|/g, '#124;').replace(/\n/g, ' ');
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function byId(a: { id: string }, b: { id: string }): number {
  return compare(a.id, b.id);
}
