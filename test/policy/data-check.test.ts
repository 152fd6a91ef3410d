import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { WritError } from '../../src/errors.js';
import { checkPolicyData, policyDataProblems } from '../../src/policy/data-check.js';
import type { PolicyData } from '../../src/policy/index.js';
import { loadPolicy } from '@open-policy-agent/opa-wasm';
import { readLiveBundle } from '../../src/policy/index.js';
import { BUNDLE_DIR } from '../support/harness.js';
import { decisionInput, policiesDir } from './support.js';

const shipped = (): PolicyData => JSON.parse(readFileSync(join(policiesDir, 'data.json'), 'utf8')) as PolicyData;

/** The problems of the shipped data after `edit`. */
function problemsAfter(edit: (writ: Record<string, any>) => void): string[] {
  const data = shipped();
  edit(data.writ as unknown as Record<string, any>);
  return policyDataProblems(data);
}

describe('the policy data is checked before a bundle is used', () => {
  it('the shipped policies/data.json has no problem', () => {
    expect(policyDataProblems(shipped())).toEqual([]);
    expect(() => checkPolicyData(shipped(), 'policies')).not.toThrow();
  });

  // Each of these builds and evaluates without complaint in Rego; what the policy makes of them is shown below.
  it.each([
    ['a class typo', (w: Record<string, any>) => (w.resource_classes[0].class = 'WRITE_EXCLUSVE'), 'data.writ.resource_classes[0].class: "WRITE_EXCLUSVE" is not one of READ_SHARED, WRITE_OPTIMISTIC, WRITE_EXCLUSIVE, MULTI_WRITER_MERGEABLE (did you mean "WRITE_EXCLUSIVE"?)'],
    ['a field class typo', (w: Record<string, any>) => (w.resource_classes[0].fields.title = 'EXCLUSIVE'), 'data.writ.resource_classes[0].fields.title: "EXCLUSIVE" is not one of READ_SHARED, WRITE_OPTIMISTIC, WRITE_EXCLUSIVE, MULTI_WRITER_MERGEABLE'],
    ['a threshold as a string', (w: Record<string, any>) => (w.approval_threshold.production = '2'), 'data.writ.approval_threshold.production must be integer (found "2")'],
    ['a misspelt approval_threshold', (w: Record<string, any>) => {
      w.approval_treshold = w.approval_threshold;
      delete w.approval_threshold;
    }, 'data.writ: "approval_threshold" is missing'],
    ['`write` as a string', (w: Record<string, any>) => (w.actions.update_post.write = 'true'), 'data.writ.actions.update_post.write must be boolean (found "true")'],
    ['an action without `write` (read as a write: safe, but said)', (w: Record<string, any>) => delete w.actions.publish_post.write, 'data.writ.actions.publish_post: "write" is missing'],
    ['a misspelt `managed`', (w: Record<string, any>) => {
      w.resource_classes[3].manged = w.resource_classes[3].managed;
      delete w.resource_classes[3].managed;
    }, 'data.writ.resource_classes[3]: "managed" is missing'],
    ['a misspelt section', (w: Record<string, any>) => {
      w.domain_ruels = w.domain_rules;
      delete w.domain_rules;
    }, 'data.writ: unknown property "domain_ruels" (did you mean "domain_rules"?)'],
  ])('refuses %s', (_what, edit, problem) => {
    expect(problemsAfter(edit)).toContain(problem);
  });

  /** The obligations the live bundle's policy gives seo-agent-7's title edit (a risk-3 request for the approval) under `edit`, without the check. */
  async function obligationsUnder(edit: (writ: Record<string, any>) => void, risk: number | null = null): Promise<Record<string, unknown>> {
    const { wasm, data } = await readLiveBundle(BUNDLE_DIR);
    const policy = await loadPolicy(wasm);
    const edited = JSON.parse(data.toString());
    edit(edited.writ);
    policy.setData(edited);
    const result = (policy.evaluate(decisionInput({}, { risk }), 0) as { result: { obligations: Record<string, unknown> } }[])[0]!.result;
    return result.obligations;
  }

  it('what those typos would do: the policy drops the lease, the version or the approval it should ask for', async () => {
    expect(await obligationsUnder(() => {})).toMatchObject({ lease_required: true, version_required: true });
    expect(await obligationsUnder((w) => (w.resource_classes[0].fields.title = 'WRITE_EXCLUSVE'))).toMatchObject({ lease_required: false, version_required: false });
    expect(await obligationsUnder((w) => (w.actions.update_post.write = 'true'))).toMatchObject({ lease_required: false, version_required: false });
    expect(await obligationsUnder((w) => delete w.actions.update_post.write)).toMatchObject({ lease_required: true, version_required: true });
    expect(await obligationsUnder(() => {}, 3)).toMatchObject({ approval_required: true });
    expect(await obligationsUnder((w) => (w.approval_threshold.production = '2'), 3)).toMatchObject({ approval_required: false });
    expect(await obligationsUnder((w) => {
      w.approval_treshold = w.approval_threshold;
      delete w.approval_threshold;
    }, 3)).toMatchObject({ approval_required: false });
    expect(await obligationsUnder((w) => (w.approval_threshold = { prodution: 2 }), 3)).toMatchObject({ approval_required: false });
  });

  it('lists every problem of the shape at once, each at its place', () => {
    const problems = problemsAfter((w) => {
      w.actions.update_post.risk = 'high';
      w.actions.deploy.riks = 1;
      w.actions.rollback.risk = -1;
      w.resource_classes[2].conflict_scope = { segment: 1, value: 'x' };
      w.aliases.push({ from: 'a' });
    });
    expect(problems).toEqual([
      'data.writ.actions.update_post.risk must be integer (found "high")',
      'data.writ.actions.deploy: unknown property "riks" (did you mean "risk"?)',
      'data.writ.actions.rollback.risk must be >= 0 (found -1)',
      'data.writ.resource_classes[2].conflict_scope must NOT have more than 1 properties (found {"segment":1,"value":"x"})',
      'data.writ.aliases[1]: "to" is missing',
    ]);
  });

  it('names are what a scope or a coordination key can hold: no whitespace, and no ":" in a conflict domain', () => {
    expect(problemsAfter((w) => {
      w.actions['update post'] = { risk: 1, write: true };
      w.approval_threshold[''] = 1;
      w.conflict_domains['SEO:META'] = {};
      w.resource_classes[1].conflict_domain = 'SEO META';
    })).toEqual([
      'data.writ.actions: the name "update post" must be non-empty, without whitespace',
      'data.writ.resource_classes[1].conflict_domain: "SEO META" must have neither whitespace nor ":"',
      'data.writ.approval_threshold: the name "" must be non-empty, without whitespace',
      'data.writ.conflict_domains: the name "SEO:META" must have neither whitespace nor ":"',
    ]);
  });

  it('environments, when declared: each once, not "*", and every approval threshold is for one of them', () => {
    expect(shipped().writ.environments).toEqual(['production', 'staging', 'development']);
    expect(problemsAfter((w) => {
      w.environments = ['production', 'production', '*'];
    })).toEqual(['data.writ.environments must NOT have duplicate items (items ## 1 and 0 are identical) (found ["production","production","*"])']);
    expect(problemsAfter((w) => {
      w.environments = ['production', '*'];
      w.approval_threshold = { prodution: 2 };
    })).toEqual([
      'data.writ.environments[1]: "*" stands for every environment in a scope; it is not an environment\'s name',
      'data.writ.approval_threshold.prodution: "prodution" is not one of data.writ.environments (production, *) (did you mean "production"?): no request would ever be in it, so its threshold would never ask for an approval',
    ]);
    expect(problemsAfter((w) => (w.environments = []))).toEqual(['data.writ.environments must NOT have fewer than 1 items (found [])']);
    // Without the list, any name is taken as written (the threshold's key included).
    expect(problemsAfter((w) => {
      delete w.environments;
      w.approval_threshold = { prodution: 2 };
    })).toEqual([]);
  });

  it('refuses a document without data.writ, or without its actions and resource classes', () => {
    expect(policyDataProblems({})).toEqual(['data: "writ" is missing']);
    expect(policyDataProblems({ writ: {} })).toEqual(['data.writ: "actions" is missing', 'data.writ: "resource_classes" is missing', 'data.writ: "approval_threshold" is missing']);
    expect(policyDataProblems([])).toEqual(['data must be object (found [])']);
  });

  it('checks what a schema cannot say: patterns, declared domains, scopes, shadowed rules, alias keys', () => {
    const problems = problemsAfter((w) => {
      delete w.resource_classes[0].conflict_scope;
      w.resource_classes[1].conflict_domain = 'SEO_METADATE';
      w.resource_classes[2].conflict_scope = { segment: 3 };
      w.resource_classes.push({ pattern: 'deploy:**', class: 'READ_SHARED', managed: false });
      w.resource_classes.push({ pattern: 'a::b', class: 'READ_SHARED', managed: false });
      w.resource_classes.push({ pattern: 'run:**', class: 'WRITE_EXCLUSIVE', managed: false, conflict_domain: 'SEO_METADATA', conflict_scope: { segment: 1 } });
      w.aliases.push({ from: 'x:*', to: 'wp:post' });
    });
    expect(problems).toEqual([
      'data.writ.resource_classes[0]: a rule with a conflict domain needs a conflict_scope ({"segment": i} or {"value": "…"}): the domain is coordinated per scope',
      'data.writ.resource_classes[1].conflict_domain: conflict domain "SEO_METADATE" is not declared in data.writ.conflict_domains',
      'data.writ.resource_classes[2].conflict_scope.segment: 3 is not a segment every key of "site:*:canonical-bulk" has (0 to 2)',
      'data.writ.resource_classes[8]: pattern "deploy:**" is the pattern of resource_classes[3], which is listed first, so this rule never applies',
      'data.writ.resource_classes[9].pattern: resource pattern "a::b" has an empty segment',
      'data.writ.resource_classes[10].conflict_scope.segment: 1 is not a segment every key of "run:**" has (0 to 0)',
      'data.writ.aliases[1].from: resource key "x:*" contains a wildcard',
    ]);
  });

  it('throws POLICY_UNAVAILABLE naming the source and listing the problems', () => {
    const data = shipped();
    (data.writ.approval_threshold as Record<string, unknown>).production = '2';
    let error: unknown;
    try {
      checkPolicyData(data, 'policies');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(WritError);
    expect(error).toMatchObject({
      code: 'POLICY_UNAVAILABLE',
      message: expect.stringContaining('the policy data of policies is not usable'),
      details: { problems: ['data.writ.approval_threshold.production must be integer (found "2")'] },
    });
    expect((error as Error).message).toContain('\n  - data.writ.approval_threshold.production must be integer (found "2")');
  });

  it('leaves domain rule settings, and data for the packages under writ.authz, to the policy author', () => {
    expect(problemsAfter((w) => {
      w.domain_rules.mine = { anything: [1, 'two'] };
      w.authz = { domain: { mine: { x: 1 } } };
    })).toEqual([]);
    expect(policyDataProblems({ writ: { actions: {}, resource_classes: [], approval_threshold: {} }, elsewhere: { x: 1 } })).toEqual([]);
  });

  it('a field_conflict_domains key the rule\'s fields do not name, and an alias listed twice', () => {
    expect(problemsAfter((w) => {
      w.resource_classes[0].field_conflict_domains.canonicl = 'SEO_METADATA';
      w.aliases.push({ from: 'wordpress:article', to: 'wp:page' });
    })).toEqual([
      'data.writ.resource_classes[0].field_conflict_domains.canonicl: "canonicl" is not one of the rule\'s fields (body, title, meta_description, tags, canonical, status): a misspelt field would lose its domain',
      'data.writ.aliases[1]: "wordpress:article" is the "from" of aliases[0], which is listed first, so this alias is never used',
    ]);
  });

  it('one spelling per name: host_segments each a segment of the pattern, spelt in lower case; patterns, fields, domains and scope values in NFC', () => {
    expect(problemsAfter((w) => {
      w.resource_classes[1].host_segments = [1, 4];
      w.resource_classes.push({ pattern: 'host:EXAMPLE.COM:*', class: 'READ_SHARED', managed: false, host_segments: [1] });
      w.resource_classes.push({ pattern: 'x:cafe\u0301', class: 'READ_SHARED', managed: false, fields: { 'cafe\u0301': 'READ_SHARED' } });
      w.resource_classes[0].conflict_scope = { value: 'cafe\u0301.com' };
    })).toEqual([
      'data.writ.resource_classes[0].conflict_scope.value is not in Unicode NFC; send "caf\u00e9.com" ("caf\\u00e9.com")',
      'data.writ.resource_classes[1].host_segments[1]: 4 is not a segment every key of "site:*:template:canonical" has (0 to 3)',
      'data.writ.resource_classes[8].host_segments[0]: segment 1 of "host:EXAMPLE.COM:*" is a host name, which keys spell in lower case, so the rule would match no key: write "example.com"',
      'data.writ.resource_classes[9].pattern: resource pattern is not in Unicode NFC; send "x:caf\u00e9" ("x:caf\\u00e9")',
      'data.writ.resource_classes[9].fields.cafe\u0301 is not in Unicode NFC; send "caf\u00e9" ("caf\\u00e9")',
    ]);
    expect(problemsAfter((w) => {
      w.resource_classes[0].conflict_scope = { value: 'Example.com' };
    })).toEqual(['data.writ.resource_classes[0].conflict_scope.value: "Example.com" scopes SEO_METADATA, which other rules scope by a host segment (host_segments), spelt in lower case in keys, so it would never join their keys: write "example.com"']);
    expect(problemsAfter((w) => {
      w.resource_classes[1].host_segments = ['1'];
    })).toEqual(['data.writ.resource_classes[1].host_segments[0] must be integer (found "1")']);
  });

  it('fields_closed is a boolean, and a rule that closes its fields lists them', () => {
    expect(problemsAfter((w) => {
      w.resource_classes[0].fields_closed = 'true';
    })).toEqual(['data.writ.resource_classes[0].fields_closed must be boolean (found "true")']);
    expect(problemsAfter((w) => {
      delete w.resource_classes[0].fields;
      delete w.resource_classes[0].field_conflict_domains;
      w.resource_classes[0].conflict_domain = 'SEO_METADATA';
    })).toEqual(['data.writ.resource_classes[0].fields_closed: a rule whose fields are closed must list them in "fields" (field → class): with none, every field of its keys would be refused']);
  });
});
