/**
 * Authority graphs drawn with cytoscape.js and laid out by dagre (ranked, left to right: governance
 * first), readable for hundreds of principals. Styles live here, not in the page (the CSP allows no
 * inline style); cytoscape draws on a canvas.
 */
import cytoscape from 'cytoscape';
import dagre from 'cytoscape-dagre';
import type { Edge } from './api.js';
import { h } from './dom.js';

cytoscape.use(dagre);

export type EdgeMark = 'added' | 'revoked' | 'expired' | 'chain' | 'unchanged' | null;

export interface DrawnEdge { edge: Edge; mark?: EdgeMark; label?: string }

/** Below this zoom, labels are too small to read (they are hidden below 7 px). */
const READABLE_ZOOM = 0.55;

const KIND_COLOUR: Record<string, string> = { grant: '#1d4ed8', delegate: '#0f766e', owns: '#7c3aed', approves: '#b45309', preempts: '#be123c' };
const MARK_COLOUR: Record<string, string> = { added: '#15803d', revoked: '#dc2626', expired: '#d97706', chain: '#1d4ed8' };

export function drawGraph(container: HTMLElement, nodes: { id: string; kind?: string; revoked?: boolean; focus?: boolean }[], edges: DrawnEdge[], onEdge?: (e: Edge) => void, onNode?: (id: string) => void): cytoscape.Core {
  const known = new Set(nodes.map((n) => n.id));
  const elements: cytoscape.ElementDefinition[] = [];
  for (const n of nodes) elements.push({ data: { id: `p:${n.id}`, label: n.id, kind: n.kind ?? 'principal' }, classes: [n.revoked ? 'revoked' : '', n.focus ? 'focus' : '', n.kind ?? ''].join(' ') });
  for (const { edge, mark, label } of edges) {
    // An ownership's "to" is managed state (a resource pattern), drawn as a node of its own.
    for (const end of [edge.from, edge.to]) {
      if (!known.has(end)) {
        known.add(end);
        elements.push({ data: { id: `p:${end}`, label: end, kind: edge.kind === 'owns' && end === edge.to ? 'state' : 'principal' }, classes: edge.kind === 'owns' && end === edge.to ? 'state' : '' });
      }
    }
    elements.push({
      data: { id: `e:${edge.id}`, source: `p:${edge.from}`, target: `p:${edge.to}`, label: label ?? edge.id, colour: (mark && MARK_COLOUR[mark]) || KIND_COLOUR[edge.kind] || '#475569', edgeId: edge.id },
      // On a large graph edge labels are shown only where they matter (marked or selected edges).
      classes: [mark ?? '', edge.revoked_at ? 'was-revoked' : '', edge.kind, edges.length > 120 && (!mark || mark === 'unchanged') ? 'quiet' : ''].join(' '),
    });
  }
  const cy = cytoscape({
    container,
    elements,
    wheelSensitivity: 0.3,
    minZoom: 0.05,
    maxZoom: 3,
    boxSelectionEnabled: false,
    style: [
      { selector: 'node', style: { 'min-zoomed-font-size': 7, 'background-color': '#e2e8f0', 'border-color': '#64748b', 'border-width': 1, label: 'data(label)', 'font-size': 11, 'font-family': 'system-ui, sans-serif', color: '#0f172a', 'text-valign': 'center', 'text-halign': 'center', shape: 'round-rectangle', width: 'label', height: 26, padding: '8px', 'text-wrap': 'none' } },
      { selector: 'node.governance', style: { 'background-color': '#1e293b', color: '#ffffff', 'border-color': '#0f172a' } },
      { selector: 'node.agent', style: { 'background-color': '#ecfeff', 'border-color': '#0e7490' } },
      { selector: 'node.human', style: { 'background-color': '#fef9c3', 'border-color': '#a16207' } },
      { selector: 'node.state', style: { 'background-color': '#f5f3ff', 'border-color': '#7c3aed', shape: 'tag', 'border-style': 'dashed' } },
      { selector: 'node.focus', style: { 'border-width': 3, 'border-color': '#1d4ed8' } },
      { selector: 'node.revoked', style: { 'background-color': '#fee2e2', 'border-color': '#dc2626', 'text-decoration': 'line-through' } as cytoscape.Css.Node },
      { selector: 'edge', style: { 'min-zoomed-font-size': 9, width: 1.6, 'line-color': 'data(colour)', 'target-arrow-color': 'data(colour)', 'target-arrow-shape': 'triangle', 'curve-style': 'bezier', label: 'data(label)', 'font-size': 9, color: '#334155', 'text-background-color': '#ffffff', 'text-background-opacity': 0.85, 'text-background-padding': '2px', 'text-rotation': 'autorotate' } },
      { selector: 'edge.quiet', style: { label: '' } },
      { selector: 'edge.quiet:selected', style: { label: 'data(label)' } },
      { selector: 'edge.was-revoked', style: { 'line-style': 'dashed', opacity: 0.6 } },
      { selector: 'edge.added, edge.revoked, edge.expired, edge.chain', style: { width: 3.5, 'font-weight': 'bold', opacity: 1 } },
      { selector: 'edge.revoked', style: { 'line-style': 'dashed' } },
      { selector: 'edge.unchanged', style: { opacity: 0.3 } },
      { selector: 'edge.expired', style: { 'line-style': 'dotted' } },
      { selector: ':selected', style: { 'overlay-color': '#1d4ed8', 'overlay-opacity': 0.15 } },
      { selector: '.faded', style: { opacity: 0.12 } },
      { selector: 'node.picked', style: { 'border-width': 3, 'border-color': '#f59e0b' } },
    ],
  });
  // Ranks far enough apart for the edge labels between them (where labels are shown at all).
  const longest = edges.length > 120 ? 0 : Math.max(0, ...edges.map((e) => (e.label ?? e.edge.id).length));
  const rankSep = Math.max(90, longest * 6 + 40);
  const layout = cy.layout({ name: 'dagre', rankDir: 'LR', nodeSep: 18, rankSep, edgeSep: 8, padding: 16, fit: true } as cytoscape.LayoutOptions);
  // A large graph fitted whole is a smudge: start at a readable zoom on governance, then pan and zoom.
  // A small one (a receipt's chain) is not blown up past its natural size.
  const frame = () => {
    if (cy.zoom() < READABLE_ZOOM) {
      const root = cy.$id('p:governance');
      cy.zoom(0.75);
      if (root.nonempty()) cy.center(root);
    } else if (cy.zoom() > 1.25) {
      cy.zoom(1.25);
      cy.center();
    }
  };
  layout.one('layoutstop', frame);
  layout.run();
  // A small drawing follows its box (a phone turned, a window narrowed); a large one keeps where the reader panned.
  if (cy.nodes().length <= 40) cy.on('resize', () => { cy.fit(undefined, 16); frame(); });
  if (onEdge) cy.on('tap', 'edge', (evt) => { const id = evt.target.data('edgeId') as string; const e = edges.find((x) => x.edge.id === id); if (e) onEdge(e.edge); });
  if (onNode) cy.on('tap', 'node', (evt) => onNode((evt.target.id() as string).slice(2)));
  return cy;
}

/** The drawing as a standalone SVG (node boxes, arrows and labels at cytoscape's positions), for an incident report. */
export function toSvg(cy: cytoscape.Core): string {
  const bb = cy.elements().boundingBox({});
  const pad = 20;
  const w = Math.ceil(bb.w + 2 * pad);
  const hgt = Math.ceil(bb.h + 2 * pad);
  const x = (v: number) => (v - bb.x1 + pad).toFixed(1);
  const y = (v: number) => (v - bb.y1 + pad).toFixed(1);
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${hgt}" viewBox="0 0 ${w} ${hgt}" font-family="system-ui, sans-serif">`,
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="context-stroke"/></marker></defs>',
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
  ];
  cy.edges().forEach((e) => {
    const s = e.sourceEndpoint();
    const t = e.targetEndpoint();
    const colour = String(e.data('colour'));
    const dash = e.hasClass('revoked') || e.hasClass('was-revoked') ? ' stroke-dasharray="6 4"' : e.hasClass('expired') ? ' stroke-dasharray="2 3"' : '';
    parts.push(`<line x1="${x(s.x)}" y1="${y(s.y)}" x2="${x(t.x)}" y2="${y(t.y)}" stroke="${colour}" stroke-width="${e.hasClass('chain') || e.hasClass('added') || e.hasClass('revoked') || e.hasClass('expired') ? 3 : 1.6}"${dash} marker-end="url(#arrow)"/>`);
    const m = e.midpoint();
    parts.push(`<text x="${x(m.x)}" y="${y(m.y - 4)}" font-size="10" text-anchor="middle" fill="#334155">${esc(String(e.data('label')))}</text>`);
  });
  cy.nodes().forEach((n) => {
    const p = n.position();
    const nw = n.width();
    const nh = n.height();
    const dark = n.hasClass('governance');
    parts.push(`<rect x="${x(p.x - nw / 2 - 8)}" y="${y(p.y - nh / 2)}" width="${(nw + 16).toFixed(1)}" height="${nh.toFixed(1)}" rx="5" fill="${dark ? '#1e293b' : '#f1f5f9'}" stroke="${n.hasClass('focus') ? '#1d4ed8' : '#64748b'}"/>`);
    parts.push(`<text x="${x(p.x)}" y="${y(p.y + 4)}" font-size="11" text-anchor="middle" fill="${dark ? '#ffffff' : '#0f172a'}">${esc(String(n.data('label')))}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

/** Saves a blob as a file named `name` (the object URL is released once the download has started). */
function save(name: string, blob: Blob): void {
  const url = URL.createObjectURL(blob);
  // In the document while clicked: some browsers ignore a click on a detached link.
  const a = document.body.appendChild(h('a', { href: url, download: name }));
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

interface ToolButton {
  label: string;
  /** Tooltip and accessible name, when the label alone does not say it. */
  title?: string;
  run(c: cytoscape.Core): void;
}

/** A toolbar of buttons acting on the drawn graph (nothing happens before it is drawn). */
function toolbar(cy: () => cytoscape.Core | null, buttons: ToolButton[]): HTMLElement {
  return h('div', { class: 'toolbar' }, buttons.map((b) =>
    h('button', { type: 'button', title: b.title, 'aria-label': b.title, onclick: () => { const c = cy(); if (c) b.run(c); } }, b.label)));
}

export function exportButtons(cy: () => cytoscape.Core | null, base: string): HTMLElement {
  return toolbar(cy, [
    { label: 'Export SVG', run: (c) => save(`${base}.svg`, new Blob([toSvg(c)], { type: 'image/svg+xml' })) },
    { label: 'Export PNG', run: (c) => save(`${base}.png`, c.png({ output: 'blob', bg: '#ffffff', full: true, scale: 2 }) as unknown as Blob) },
  ]);
}

/** Shows a principal and the principals it is linked to (in both directions, transitively), fading the rest. */
export function focusOn(cy: cytoscape.Core, principal: string): boolean {
  const node = cy.$id(`p:${principal}`);
  cy.elements().removeClass('faded picked');
  if (node.empty()) return false;
  const near = node.union(node.predecessors()).union(node.successors());
  cy.elements().not(near).addClass('faded');
  node.addClass('picked');
  cy.fit(near, 40);
  if (cy.zoom() < READABLE_ZOOM) {
    cy.zoom(0.75);
    cy.center(node);
  }
  return true;
}

export function clearFocus(cy: cytoscape.Core): void {
  cy.elements().removeClass('faded picked');
}

/** Zoom and fit controls, for a keyboard (the drawing itself is a canvas). */
export function viewButtons(cy: () => cytoscape.Core | null): HTMLElement {
  const zoomBy = (c: cytoscape.Core, f: number) => c.zoom({ level: c.zoom() * f, renderedPosition: { x: c.width() / 2, y: c.height() / 2 } });
  return toolbar(cy, [
    { label: '+', title: 'Zoom in', run: (c) => zoomBy(c, 1.25) },
    { label: '−', title: 'Zoom out', run: (c) => zoomBy(c, 0.8) },
    { label: 'Fit', title: 'Fit the whole graph', run: (c) => { clearFocus(c); c.fit(undefined, 20); } },
  ]);
}
