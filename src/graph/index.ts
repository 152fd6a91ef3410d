/** The authority graph: model, patterns, the in-memory graph, chain and owner resolution, export. */
export * from './model.js';
export { ECHO_LIMIT, nfcProblem, validatePattern, validateResourceKey, matchesPattern, patternCovers, patternsOverlap, specificity } from './patterns.js';
export {
  AuthorityGraph,
  MANAGED_STATE_PREFIX,
  PRIORITY_CLASS_PREFIX,
  managedStateNodeId,
  isReservedNodeId,
  isPrincipalNode,
  type AuthorityGraphOptions,
  type GraphNode,
  type ManagedStateNode,
  type PriorityClassNode,
} from './authority-graph.js';
export { LiveGraph, OperationGraph, type GraphReader, type LiveGraphOptions, type GraphEventSource } from './live-graph.js';
export { GraphHeadMoved, type GraphEventStore } from './event-store.js';
export { hasEdgeEnded, isEdgeLive, principalEnds, toPolicyEdge } from './liveness.js';
export { edgeCovers, scopeCovers } from './edge-cover.js';
export {
  resolveChains,
  resolveChainsTo,
  principalsOf,
  DEFAULT_RESOLUTION_BUDGET,
  type ChainRequest,
  type ResolutionBudget,
  type ResolutionMode,
  type ResolveOptions,
  type ResolutionStats,
} from './chain-resolver.js';
export { resolveOwners, ownershipAfter, findOwnershipConflict, approvalEdges, type OwnershipView } from './ownership.js';
export {
  exportGraphJson,
  exportGraphDot,
  exportChainDot,
  exportChainMermaid,
  shortScope,
  type DotOptions,
  type GraphExport,
} from './export.js';
