/**
 * The policy data a policy author edits (`data.writ`: actions, resource classes, approval thresholds,
 * environments, aliases, conflict domains), checked before a bundle is published or loaded.
 *
 * Rego reads whatever it is given: a typo there does not fail, it changes verdicts, and some typos open
 * what they were meant to close (a class `WRITE_EXCLUSVE` or a `write` of `"true"` requires neither
 * lease nor version; an approval threshold `"2"` is never exceeded, because every number sorts below
 * every string, and a misspelt `approval_threshold` asks for no approval at all). So a bundle whose data
 * does not have the shape the policy and the service rely on is refused by `writ policy build`, and by
 * every engine that would load it (a running service keeps its current bundle; one starting refuses to
 * start). test/policy/data-check.test.ts shows what the policy does with each of these typos.
 *
 * The shape is a JSON Schema (checked by ajv); what a schema cannot say (resource patterns, conflict
 * domains that must be declared, a scope segment that must exist, a rule shadowed by an earlier one)
 * is checked after it.
 */
import { WritError } from '../errors.js';
import { nfcProblem, validatePattern, validateResourceKey } from '../graph/index.js';
import { didYouMean, dottedPath, schemaChecker } from '../json-schema.js';
import type { PolicyData, ResourceClassRule } from './types.js';

const CLASSES: readonly ResourceClassRule['class'][] = ['READ_SHARED', 'WRITE_OPTIMISTIC', 'WRITE_EXCLUSIVE', 'MULTI_WRITER_MERGEABLE'];
/** A name (an action, a field, an environment): what a scope may hold, non-empty and without whitespace. */
const name = { type: 'string', pattern: '^\\S+$' } as const;
/** A conflict domain's name: it becomes a segment of the coordination key `domain:NAME:SCOPE`. */
const domainName = { type: 'string', pattern: '^[^\\s:]+$' } as const;
const resourceClass = { enum: CLASSES } as const;

/** `data.writ` as the policy (policies/README.md) and the service (resources.ts) read it. */
export const POLICY_DATA_SCHEMA = {
  type: 'object',
  required: ['writ'],
  properties: {
    writ: {
      type: 'object',
      // A misspelt section is as good as a missing one to Rego (`approval_treshold`: no approval is ever
      // required), so there are no sections but these; `authz` is data for the packages under writ.authz
      // (a data.json in one of their folders), `domain_rules` the settings of domain rules.
      required: ['actions', 'resource_classes', 'approval_threshold'],
      additionalProperties: false,
      properties: {
        actions: {
          type: 'object',
          propertyNames: name,
          additionalProperties: {
            type: 'object',
            required: ['risk', 'write'],
            additionalProperties: false,
            properties: { risk: { type: 'integer', minimum: 0 }, write: { type: 'boolean' }, description: { type: 'string' } },
          },
        },
        resource_classes: {
          type: 'array',
          items: {
            type: 'object',
            required: ['pattern', 'class', 'managed'],
            additionalProperties: false,
            properties: {
              pattern: { type: 'string' },
              class: resourceClass,
              managed: { type: 'boolean' },
              fields: { type: 'object', propertyNames: name, additionalProperties: resourceClass },
              fields_closed: { type: 'boolean' },
              conflict_domain: domainName,
              field_conflict_domains: { type: 'object', propertyNames: name, additionalProperties: domainName },
              conflict_scope: {
                type: 'object',
                minProperties: 1,
                maxProperties: 1,
                additionalProperties: false,
                properties: { segment: { type: 'integer', minimum: 0 }, value: domainName },
              },
              host_segments: { type: 'array', uniqueItems: true, items: { type: 'integer', minimum: 0 } },
              description: { type: 'string' },
            },
          },
        },
        approval_threshold: { type: 'object', propertyNames: name, additionalProperties: { type: 'integer', minimum: 0 } },
        environments: { type: 'array', minItems: 1, uniqueItems: true, items: name },
        aliases: {
          type: 'array',
          items: { type: 'object', required: ['from', 'to'], additionalProperties: false, properties: { from: { type: 'string' }, to: { type: 'string' } } },
        },
        conflict_domains: { type: 'object', propertyNames: domainName, additionalProperties: { type: 'object' } },
        domain_rules: { type: 'object' },
        authz: { type: 'object' },
      },
    },
  },
} as const;

const schemaProblems = schemaChecker(POLICY_DATA_SCHEMA, {
  place: (segments) => `data${dottedPath(segments)}`,
  patternProblem: (pattern) => (pattern === domainName.pattern ? 'must have neither whitespace nor ":"' : 'must be non-empty, without whitespace'),
});

/**
 * Every problem of `data` (the bundle's whole data document) as a sentence naming its place
 * (`data.writ.actions.update_post.risk`), in document order; empty when the data is usable.
 */
export function policyDataProblems(data: unknown): string[] {
  const problems = schemaProblems(data);
  return problems.length > 0 ? problems : crossChecks(data as PolicyData);
}

/** Throws POLICY_UNAVAILABLE listing every problem of `data`, read from `source` (a file or bundle, for the message). */
export function checkPolicyData(data: unknown, source: string): asserts data is PolicyData {
  const problems = policyDataProblems(data);
  if (problems.length === 0) return;
  throw new WritError('POLICY_UNAVAILABLE', `the policy data of ${source} is not usable (policies/README.md, "The data is checked before it is used"):\n${problems.map((p) => `  - ${p}`).join('\n')}`, {
    problems,
  });
}

function crossChecks(data: PolicyData): string[] {
  const problems: string[] = [];
  const writ = data.writ;
  const declared = new Set(Object.keys(writ.conflict_domains ?? {}));
  const seen = new Map<string, number>();
  writ.resource_classes.forEach((rule, i) => {
    const at = `data.writ.resource_classes[${i}]`;
    const patternProblem = validatePattern(rule.pattern);
    if (patternProblem) problems.push(`${at}.pattern: ${patternProblem}`);
    const first = seen.get(rule.pattern);
    if (first !== undefined) problems.push(`${at}: pattern "${rule.pattern}" is the pattern of resource_classes[${first}], which is listed first, so this rule never applies`);
    else seen.set(rule.pattern, i);
    if (rule.fields_closed === true && Object.keys(rule.fields ?? {}).length === 0) {
      problems.push(`${at}.fields_closed: a rule whose fields are closed must list them in "fields" (field → class): with none, every field of its keys would be refused`);
    }
    if (rule.fields !== undefined) {
      for (const field of Object.keys(rule.field_conflict_domains ?? {})) {
        if (!Object.hasOwn(rule.fields, field)) problems.push(`${at}.field_conflict_domains.${field}: "${field}" is not one of the rule's fields (${Object.keys(rule.fields).join(', ')}): a misspelt field would lose its domain`);
      }
    }
    const domains = [
      ...(rule.conflict_domain === undefined ? [] : [[`${at}.conflict_domain`, rule.conflict_domain] as const]),
      ...Object.entries(rule.field_conflict_domains ?? {}).map(([field, domain]) => [`${at}.field_conflict_domains.${field}`, domain] as const),
    ];
    for (const [where, domain] of domains) {
      if (!declared.has(domain)) problems.push(`${where}: conflict domain "${domain}" is not declared in data.writ.conflict_domains`);
    }
    if (domains.length > 0 && rule.conflict_scope === undefined) {
      problems.push(`${at}: a rule with a conflict domain needs a conflict_scope ({"segment": i} or {"value": "…"}): the domain is coordinated per scope`);
    }
    const segment = rule.conflict_scope?.segment;
    const segments = rule.pattern.split(':');
    const fixed = segments.at(-1) === '**' ? segments.length - 1 : segments.length;
    if (segment !== undefined && !patternProblem) {
      if (segment >= fixed) problems.push(`${at}.conflict_scope.segment: ${segment} is not a segment every key of "${rule.pattern}" has (0 to ${fixed - 1})`);
    }
    (rule.host_segments ?? []).forEach((host, j) => {
      if (patternProblem) return;
      if (host >= fixed) problems.push(`${at}.host_segments[${j}]: ${host} is not a segment every key of "${rule.pattern}" has (0 to ${fixed - 1})`);
      else if (segments[host] !== segments[host]!.toLowerCase()) problems.push(`${at}.host_segments[${j}]: segment ${host} of "${rule.pattern}" is a host name, which keys spell in lower case, so the rule would match no key: write "${segments[host]!.toLowerCase()}"`);
    });
    // Names that become part of coordination keys (R#field, domain:NAME:SCOPE): one spelling each.
    const names = [
      ...Object.keys(rule.fields ?? {}).map((f) => [`${at}.fields.${f}`, f] as const),
      ...domains,
      ...(rule.conflict_scope?.value === undefined ? [] : [[`${at}.conflict_scope.value`, rule.conflict_scope.value] as const]),
    ];
    for (const [where, value] of names) {
      const problem = nfcProblem(value, where);
      if (problem) problems.push(problem);
    }
  });
  // A domain scoped by a host segment somewhere is a domain of hosts: a fixed scope of it names one in
  // lower case, as keys do, or it would never join the keys of that site (`Example.com`).
  const domainsOf = (rule: ResourceClassRule) => [rule.conflict_domain, ...Object.values(rule.field_conflict_domains ?? {})].filter((d) => d !== undefined);
  const hostScoped = new Set(writ.resource_classes.filter((r) => r.conflict_scope?.segment !== undefined && (r.host_segments ?? []).includes(r.conflict_scope.segment)).flatMap(domainsOf));
  writ.resource_classes.forEach((rule, i) => {
    const value = rule.conflict_scope?.value;
    const domain = domainsOf(rule).find((d) => hostScoped.has(d));
    if (value !== undefined && domain !== undefined && value !== value.toLowerCase()) {
      problems.push(`data.writ.resource_classes[${i}].conflict_scope.value: "${value}" scopes ${domain}, which other rules scope by a host segment (host_segments), spelt in lower case in keys, so it would never join their keys: write "${value.toLowerCase()}"`);
    }
  });
  const froms = new Map<string, number>();
  (writ.aliases ?? []).forEach((alias, i) => {
    for (const side of ['from', 'to'] as const) {
      const problem = validateResourceKey(alias[side]);
      if (problem) problems.push(`data.writ.aliases[${i}].${side}: ${problem}`);
    }
    const first = froms.get(alias.from);
    if (first !== undefined) problems.push(`data.writ.aliases[${i}]: "${alias.from}" is the "from" of aliases[${first}], which is listed first, so this alias is never used`);
    else froms.set(alias.from, i);
  });
  if (writ.environments !== undefined) {
    const environments = writ.environments;
    environments.forEach((environment, i) => {
      if (environment === '*') problems.push(`data.writ.environments[${i}]: "*" stands for every environment in a scope; it is not an environment's name`);
    });
    for (const environment of Object.keys(writ.approval_threshold)) {
      if (!environments.includes(environment)) {
        problems.push(`data.writ.approval_threshold.${environment}: "${environment}" is not one of data.writ.environments (${environments.join(', ')})${didYouMean(environment, environments)}: no request would ever be in it, so its threshold would never ask for an approval`);
      }
    }
  }
  return problems;
}
