import { describe, expect, it } from 'vitest';
import { checkDecisionBinding, type DecisionRequest } from '../../src/decision/index.js';
import { claims } from './helpers.js';

const request = (over: Partial<DecisionRequest> = {}): DecisionRequest => ({
  principal: 'seo-agent-7',
  action: 'update_post',
  resource: 'wp:post:1024',
  environment: 'production',
  fields: ['title', 'meta_description'],
  ...over,
});

function mismatch(req: DecisionRequest) {
  try {
    checkDecisionBinding(claims(), req);
  } catch (e) {
    return e as { code: string; message: string; details: Record<string, unknown> };
  }
  throw new Error('expected DECISION_MISMATCH');
}

describe('a decision is bound to one request', () => {
  it('accepts the request it was made for, with fields in any order', () => {
    expect(() => checkDecisionBinding(claims(), request())).not.toThrow();
    expect(() => checkDecisionBinding(claims(), request({ fields: ['meta_description', 'title', 'title'] }))).not.toThrow();
  });

  it.each([
    ['principal', { principal: 'content-agent' }, 'decision was made for principal seo-agent-7, not content-agent'],
    ['action', { action: 'delete_post' }, 'decision was made for action update_post, not delete_post'],
    ['resource', { resource: 'wp:post:1' }, 'decision was made for resource wp:post:1024, not wp:post:1'],
    ['environment', { environment: 'staging' }, 'decision was made for environment production, not staging'],
  ] as const)('refuses another %s', (dimension, over, message) => {
    const e = mismatch(request(over));
    expect(e).toMatchObject({ code: 'DECISION_MISMATCH', message, details: { dimension } });
  });

  it('refuses a wider, narrower or different field set', () => {
    for (const fields of [['title', 'meta_description', 'body'], ['title'], ['title', 'body'], []]) {
      const e = mismatch(request({ fields }));
      expect(e).toMatchObject({ code: 'DECISION_MISMATCH', details: { dimension: 'fields' } });
    }
    expect(mismatch(request({ fields: ['body', 'title'] })).message).toBe(
      'decision was made for fields [meta_description, title], not [body, title]',
    );
  });

  it('names the first mismatching dimension', () => {
    expect(mismatch(request({ resource: 'wp:post:1', fields: ['body'], principal: 'x' })).details.dimension).toBe('principal');
  });
});
