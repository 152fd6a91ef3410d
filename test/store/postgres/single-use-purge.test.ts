import { describe, expect, it } from 'vitest';
import { SingleUsePurge } from '../../../src/store/postgres/single-use-store.js';

/** A purge whose bites answer from a script (no database): how it paces, loops, fails and closes. */
function scripted(answers: (number | Error | { held: number })[]) {
  const statements: string[] = [];
  let release: (() => void) | null = null;
  const purge = new SingleUsePurge(async (text) => {
    statements.push(text);
    const answer = answers.shift() ?? 0;
    if (answer instanceof Error) throw answer;
    if (typeof answer === 'number') return answer;
    await new Promise<void>((r) => (release = r)); // held until released
    return answer.held;
  });
  return { purge, statements, release: () => release?.() };
}

describe('the background purge of single-use ids (PostgreSQL)', () => {
  it('bites again at once while a bite comes back full (1,000), and runs at most once a second by the spends\' clock', async () => {
    const { purge, statements } = scripted([1_000, 1_000, 7, 0]);
    purge.due(10_000);
    await purge.idle();
    expect(purge.counts).toEqual({ bites: 3, deleted: 2_007, failures: 0 });
    expect(statements[0]).toMatch(/FOR UPDATE SKIP LOCKED/);
    expect(statements[0]).toMatch(/expires_at <= writ_now_ms\(\) - 10000/);
    purge.due(10_999);
    await purge.idle();
    expect(purge.counts.bites).toBe(3);
    purge.due(11_000);
    await purge.idle();
    expect(purge.counts.bites).toBe(4);
  });

  it('a clock that went back does not stop the purges until it catches up', async () => {
    const { purge } = scripted([0, 0]);
    purge.due(3_600_000);
    await purge.idle();
    purge.due(1_000); // an hour back
    await purge.idle();
    expect(purge.counts.bites).toBe(2);
  });

  it('one purge at a time: a spend while one runs starts none', async () => {
    const s = scripted([{ held: 0 }]);
    s.purge.due(0);
    s.purge.due(5_000);
    s.purge.due(10_000);
    await Promise.resolve();
    expect(s.statements).toHaveLength(1);
    s.release();
    await s.purge.idle();
    expect(s.purge.counts).toEqual({ bites: 1, deleted: 0, failures: 0 });
  });

  it('a failed bite ends its run quietly and is counted; the next due spend starts another', async () => {
    const { purge, statements } = scripted([1_000, new Error('connection terminated'), 5]);
    purge.due(0);
    await purge.idle();
    expect(purge.counts).toEqual({ bites: 1, deleted: 1_000, failures: 1 });
    purge.due(1_000);
    await purge.idle();
    expect(purge.counts).toEqual({ bites: 2, deleted: 1_005, failures: 1 });
    expect(statements).toHaveLength(3);
  });

  it('close() waits for the running purge, ends its run after the bite in flight, and no purge starts after it', async () => {
    const s = scripted([{ held: 1_000 }, 1_000, 1_000]);
    s.purge.due(0);
    await Promise.resolve();
    let closed = false;
    const closing = s.purge.close().then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(closed).toBe(false);
    s.release();
    await closing;
    expect(s.statements).toHaveLength(1);
    s.purge.due(60_000);
    await s.purge.idle();
    expect(s.statements).toHaveLength(1);
  });
});
