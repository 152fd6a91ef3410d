import { describe, expect, it } from 'vitest';
import { openStage, playStories } from '../../src/demo/index.js';
import { REPO } from '../support/harness.js';

describe('the demo', () => {
  it('plays every story end to end over HTTP, and each ends the way it says', async () => {
    const stage = await openStage(REPO);
    const lines: string[] = [];
    try {
      const results = await playStories(stage, (l) => lines.push(l));
      expect(results.map((r) => r.title)).toHaveLength(8);
      for (const r of results) expect(r.ok, `${r.title}: expected ${r.expected}, got ${r.outcome}\n${lines.join('\n')}`).toBe(true);
    } finally {
      await stage.close();
    }
  }, 60_000);
});
