/**
 * One decision as a decision log event, in the shape of OPA's decision log (so pipelines that ingest
 * OPA's logs ingest Writ's): `decision_id`, `labels`, `bundles` with the policy revision, `path`,
 * `input`, `result`, `timestamp`, `metrics`, `erased`; Writ's own fields sit under `writ`.
 */
export interface DecisionLogEvent {
  decision_id: string;
  /** `id` (this process), `app`, `version`, plus the configured labels. */
  labels: Record<string, string>;
  /** The policy bundle the decision was made with: `{ writ: { revision } }`. */
  bundles: Record<string, { revision: string }>;
  /** The policy entrypoint that judged it. */
  path: string;
  input: Record<string, unknown>;
  result: Record<string, unknown>;
  /** RFC 3339, when the decision was made. */
  timestamp: string;
  /** The address the request came from (OPA's `requested_by`), when it came over HTTP. */
  requested_by?: string;
  /** Nanoseconds, OPA style (`timer_*_ns`). */
  metrics: Record<string, number>;
  /** JSON pointers removed by the configured masks (OPA's `erased`); absent when nothing was removed. */
  erased?: string[];
  writ: {
    /** The principal the decision is about (the subject). */
    principal: string;
    /** The authenticated caller that asked (differs from `principal` when governance or an auditor asks about someone). */
    asked_by: string;
    /** Which front door asked: `v1` (POST /v1/decisions) or `authzen` (POST /access/v1/…). */
    front_door: 'v1' | 'authzen';
    graph_revision: number;
    /** Edge ids of the chain that allows, governance first; empty on deny. */
    chain: string[];
    /** RFC 3339 expiry of the signed decision; null on deny. */
    expires_at: string | null;
  };
}

/** An event before the log adds its labels and applies its masks. */
export type DecisionRecord = Omit<DecisionLogEvent, 'labels' | 'erased'>;

function unescapePointerSegment(s: string): string {
  return s.replace(/~1/g, '/').replace(/~0/g, '~');
}

/**
 * Removes the values at `pointers` (JSON pointers such as `/input/properties/subject/email`) from a
 * copy of the event; the pointers that removed something are listed in `erased`, as OPA does.
 */
export function maskEvent(event: DecisionLogEvent, pointers: readonly string[]): DecisionLogEvent {
  if (pointers.length === 0) return event;
  const copy = structuredClone(event);
  const erased: string[] = [];
  for (const pointer of pointers) {
    const path = pointer.split('/').slice(1).map(unescapePointerSegment);
    let node: unknown = copy;
    for (const segment of path.slice(0, -1)) {
      node = typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[segment] : undefined;
    }
    const last = path[path.length - 1]!;
    if (typeof node === 'object' && node !== null && Object.hasOwn(node, last)) {
      if (Array.isArray(node)) continue; // array elements are not masked by index: the positions shift
      delete (node as Record<string, unknown>)[last];
      erased.push(pointer);
    }
  }
  if (erased.length > 0) copy.erased = [...(copy.erased ?? []), ...erased];
  return copy;
}
