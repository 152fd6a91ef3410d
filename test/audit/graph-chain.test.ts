import { describe, expect, it } from 'vitest';
import { GENESIS_HASH } from '../../src/audit/hash-chain.js';
import { GRAPH_VERIFY_CHUNK, graphEventHash, linkGraphEvents, verifyGraphLog, type GraphChainHead, type GraphEventRow, type GraphLogChain } from '../../src/audit/graph-chain.js';

const rows = (n: number): GraphEventRow[] => {
  const r = Array.from({ length: n }, (_, i) => ({ revision: i + 1, at: 1_000 + i, actor: 'governance', type: 'edge.created', payload: `{"type":"edge.created","n":${i + 1}}`, hash: null as string | null }));
  linkGraphEvents(GENESIS_HASH, r);
  return r;
};

/** A log served from memory; `onRead` runs before each chunk read (to change it between chunks). */
function served(log: GraphEventRow[], head: () => GraphChainHead, onRead: (after: number) => void = () => {}) {
  const g: GraphLogChain = {
    chainHead: async () => head(),
    rowsAfter: async (after, limit) => {
      onRead(after);
      return log.filter((r) => r.revision > after).slice(0, limit).map((r) => ({ ...r }));
    },
  };
  return <T>(f: (g: GraphLogChain) => Promise<T>) => f(g);
}

describe('graph log walk', () => {
  it('hashes the fields as documented (actor and type JSON-quoted)', () => {
    const e = { revision: 7, at: 42, actor: 'a\nb', type: 'edge.revoked', payload: '{"x":1}' };
    expect(graphEventHash(GENESIS_HASH, e)).toMatch(/^[0-9a-f]{64}$/);
    expect(graphEventHash(GENESIS_HASH, e)).not.toBe(graphEventHash(GENESIS_HASH, { ...e, actor: 'a', type: 'b\nedge.revoked' }));
  });

  it('an old writer\'s events filled in by an append between two chunks are not taken for a hash removed', async () => {
    const log = rows(GRAPH_VERIFY_CHUNK + 5);
    // Events 1000..1005 were appended unhashed by an older Writ; an append fills them in just after the first chunk was read.
    const hashed = log.map((r) => r.hash);
    for (const r of log.slice(GRAPH_VERIFY_CHUNK - 1)) r.hash = null;
    let filled = false;
    const read = served(log, () => (filled ? { revision: log.length, hashed: log.length, hash: hashed[log.length - 1]! } : { revision: log.length, hashed: GRAPH_VERIFY_CHUNK - 1, hash: hashed[GRAPH_VERIFY_CHUNK - 2]! }), (after) => {
      if (after > 0 && !filled) {
        log.forEach((r, i) => (r.hash = hashed[i]!));
        filled = true;
      }
    });
    expect(await verifyGraphLog(read, undefined, async () => {})).toMatchObject({ ok: true, events: log.length, unhashed: 0 });
  });

  it('a hash removed stays a break when read again', async () => {
    const log = rows(5);
    log[1]!.hash = null;
    const read = served(log, () => ({ revision: 5, hashed: 5, hash: log[4]!.hash! }));
    expect(await verifyGraphLog(read, undefined, async () => {})).toMatchObject({ ok: false, firstBadRevision: 2 });
  });

  it('two events swapped (revisions kept in place) break at the first', async () => {
    const log = rows(4);
    const [a, b] = [log[1]!, log[2]!];
    log[1] = { ...b, revision: 2 };
    log[2] = { ...a, revision: 3 };
    const read = served(log, () => ({ revision: 4, hashed: 4, hash: log[3]!.hash! }));
    expect(await verifyGraphLog(read, undefined, async () => {})).toMatchObject({ ok: false, firstBadRevision: 2, problem: expect.stringMatching(/does not match its hash/) });
  });
});
