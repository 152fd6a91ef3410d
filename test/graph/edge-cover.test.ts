import { describe, expect, it } from 'vitest';
import { edgeCovers, type Edge } from '../../src/graph/index.js';

const wide: Omit<Edge, 'revision'> = {
  id: 'w', kind: 'delegate', from: 'o', to: 'a', creator: 'o', reason: 'r', created_at: 0, not_before: null, expires_at: null, revoked_at: null, max_depth: 1,
  scope: { actions: ['update_post', 'read_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['*'], constraints: { risk_max: 2 } },
};
const narrow = (change: Partial<Edge['scope']> & { edge?: Partial<Edge> } = {}) => {
  const { edge, ...scope } = change;
  return { ...wide, id: 'n', max_depth: 0, ...edge, scope: { actions: ['update_post'], resources: ['wp:post:7'], environments: ['production'], fields: ['body'], constraints: { risk_max: 1 }, ...scope } };
};

describe('edgeCovers: a chain ending in one edge gives everything a chain ending in the other gives', () => {
  it('covers a narrower edge on every dimension, and itself', () => {
    expect(edgeCovers(wide, narrow())).toBe(true);
    expect(edgeCovers(wide, wide)).toBe(true);
    expect(edgeCovers(narrow(), wide)).toBe(false);
  });

  it('does not cover an edge wider on any one dimension', () => {
    expect(edgeCovers(wide, narrow({ actions: ['delete_post'] }))).toBe(false);
    expect(edgeCovers(wide, narrow({ actions: ['*'] }))).toBe(false);
    expect(edgeCovers(wide, narrow({ resources: ['wp:page:1'] }))).toBe(false);
    expect(edgeCovers(wide, narrow({ resources: ['wp:post:**'] }))).toBe(false);
    expect(edgeCovers(wide, narrow({ environments: ['staging'] }))).toBe(false);
    expect(edgeCovers(wide, narrow({ constraints: { risk_max: 3 } }))).toBe(false);
    expect(edgeCovers(wide, narrow({ constraints: { risk_max: 1, hours: [9, 17] } }))).toBe(false);
    expect(edgeCovers(wide, narrow({ edge: { max_depth: 2 } }))).toBe(false);
    expect(edgeCovers({ ...wide, expires_at: 1000 }, narrow())).toBe(false); // the narrow one lasts longer
    expect(edgeCovers({ ...wide, expires_at: 1000 }, narrow({ edge: { expires_at: 900 } }))).toBe(true);
    expect(edgeCovers({ ...wide, not_before: 500 }, narrow({ edge: { not_before: 400 } }))).toBe(false);
  });
});
