import { WritError } from '../errors.js';
import { ECHO_LIMIT, matchesPattern, nfcProblem, patternsOverlap, validateResourceKey } from '../graph/index.js';
import type { EdgeKind, Scope } from '../graph/model.js';
import { didYouMean } from '../json-schema.js';
import type { PolicyData, ResourceClassRule } from '../policy/types.js';
import { keyRoot } from '../wire/key-family.js';
import { FENCING_SEPARATORS } from '../wire/fencing-header.js';

/**
 * The coordination registry's key rules: aliases are rewritten to canonical keys (agents never invent
 * keys), and a key must belong to a declared resource class, else it is unknown. One name is one key:
 * a key not in Unicode NFC (nfcProblem), or one spelling a host segment of its class in capitals
 * (hostInCapitals), is refused (UNPROCESSABLE), never rewritten: the key sent is the one the
 * upstream and the receipts see.
 */
export function canonicalResource(data: PolicyData, key: string): string {
  const nfc = nfcProblem(key, 'resource key');
  if (nfc) throw new WritError('UNPROCESSABLE', `resource: ${nfc}`);
  const alias = aliasOf(data, key);
  const canonical = alias ? alias.to + key.slice(alias.from.length) : key;
  const problem = validateResourceKey(canonical);
  if (problem) throw new WritError('UNPROCESSABLE', `resource: ${problem}`);
  const classes = data.writ.resource_classes.filter((rule) => matchesPattern(rule.pattern, canonical));
  if (classes.length === 0) {
    throw new WritError('UNKNOWN_RESOURCE', `"${key}" is not a registered coordination key (no resource class matches it)`);
  }
  const host = hostInCapitals(classes, canonical);
  if (host) throw new WritError('UNPROCESSABLE', `resource: ${hostProblem(host, canonical, 'resource key', 'send')}`);
  return canonical;
}

/**
 * The first host segment of one of `classes` that `key` (or a pattern's literal segments) spells in
 * capitals, with the key in lower case there, or null. A host name is read without case (DNS), so
 * `site:EXAMPLE.COM:…` and `site:example.com:…` would be two keys, and two conflict domains, for one
 * site: keys spell host segments in lower case.
 */
function hostInCapitals(classes: readonly ResourceClassRule[], key: string): { segment: number; rule: ResourceClassRule; lower: string } | null {
  const segments = key.split(':');
  for (const rule of classes) {
    const hosts = rule.host_segments ?? [];
    for (const i of hosts) {
      const s = segments[i];
      if (s === undefined || s === s.toLowerCase()) continue;
      return { segment: i, rule, lower: segments.map((seg, j) => (hosts.includes(j) ? seg.toLowerCase() : seg)).join(':') };
    }
  }
  return null;
}

/** hostInCapitals as a sentence about `what` (`resource key`); long input is not repeated (as nfcProblem's). */
function hostProblem(h: { segment: number; rule: ResourceClassRule; lower: string }, key: string, what: string, send: string): string {
  const why = `segment ${h.segment} is a host name (resource class ${h.rule.pattern}, host_segments), which is read without case, so keys spell it in lower case`;
  return key.length <= ECHO_LIMIT ? `${what} "${key}": ${why}; ${send} "${h.lower}"` : `${what}: ${why}; ${send} it with that segment in lower case`;
}

/**
 * Throws UNPROCESSABLE when `key`, asked for in a read (receipts, leases), is spelt otherwise than keys are
 * recorded: not in NFC, under an alias, or with a host segment in capitals, naming the spelling to ask for.
 * Such a query would match nothing and answer "no writes" for a key that was written. Only the spelling is
 * checked, not that a resource class matches: receipts outlive the policy that governed them. `key` may be a
 * coordination key (`R#f`): its resource part is checked.
 */
export function checkQuerySpelling(data: PolicyData, key: string, what: string): void {
  const nfc = nfcProblem(key, what);
  if (nfc) throw new WritError('UNPROCESSABLE', nfc);
  const resource = keyRoot(key);
  const alias = aliasOf(data, resource);
  if (alias) {
    const canonical = alias.to + key.slice(alias.from.length);
    throw new WritError('UNPROCESSABLE', `${what} "${key}" is written with the alias "${alias.from}", and keys are recorded as "${alias.to}": ask for "${canonical}"`);
  }
  const host = hostInCapitals(data.writ.resource_classes.filter((rule) => matchesPattern(rule.pattern, resource)), key);
  if (host) throw new WritError('UNPROCESSABLE', hostProblem(host, key, what, 'ask for'));
}

/** The alias a key (or a pattern) is written under: the first whose `from` is its leading segments. */
function aliasOf(data: PolicyData, key: string): { from: string; to: string } | undefined {
  return (data.writ.aliases ?? []).find((a) => key === a.from || key.startsWith(`${a.from}:`));
}

/** The type of a key: every segment but the last (`wp:post:1024` → `wp:post`; a one-segment key is its own type). */
export function resourceTypeOf(key: string): string {
  const i = key.lastIndexOf(':');
  return i < 0 ? key : key.slice(0, i);
}

/**
 * The canonical key of `key` (see canonicalResource), checking that `type` is the type of the key as
 * given or of its canonical key (`wordpress:article` or `wp:post` for `wordpress:article:1024`).
 */
export function checkResourceType(data: PolicyData, key: string, type: string): string {
  const canonical = canonicalResource(data, key);
  if (type !== resourceTypeOf(key) && type !== resourceTypeOf(canonical)) {
    throw new WritError('MALFORMED_REQUEST', `resource.type "${type}" is not the type of ${key} (expected "${resourceTypeOf(canonical)}")`);
  }
  return canonical;
}

/**
 * An edge's scope must be able to apply under the policy's registry, as a relationship must name
 * relations its schema defines: every action (other than `*`) is in the action catalogue, every
 * environment (other than `*`) is declared where the policy declares them (environmentProblem), every
 * resource pattern can match a key of some resource class, and every field is one the classes it
 * reaches have where they close their fields (fieldsProblems). Otherwise the edge would be stored and
 * silently never count (a typo such as `update_psot`, or `wordpress:article:*`, an alias: chains match
 * canonical keys). Preemption edges name no actions or resources. Throws UNPROCESSABLE naming every
 * problem of the scope (scopeProblems), not the first alone.
 */
export function checkScopeApplies(data: PolicyData, kind: EdgeKind, scope: Scope): void {
  const problems = scopeProblems(data, kind, scope);
  if (problems.length > 0) throw new WritError('UNPROCESSABLE', problems.join('; '));
}

/** Why `edge` could never apply under `data`'s registry (checkScopeApplies' message), or null. */
export function registryProblem(data: PolicyData, edge: { kind: EdgeKind; scope: Scope }): string | null {
  const problems = scopeProblems(data, edge.kind, edge.scope);
  return problems.length > 0 ? problems.join('; ') : null;
}

/** Each reason a scope of this kind could never apply under `data`'s registry (see checkScopeApplies), in the scope's order. */
export function scopeProblems(data: PolicyData, kind: EdgeKind, scope: Scope): string[] {
  return scopeCheck(data, kind, scope).problems;
}

/**
 * Whether a scope with registry problems still applies in part (every dimension keeps an action, a
 * pattern, an environment and a field the policy has: `[production, qa]` still grants in production), or
 * counts for nothing at all.
 */
export function scopeAppliesInPart(data: PolicyData, kind: EdgeKind, scope: Scope): boolean {
  return !scopeCheck(data, kind, scope).dead;
}

function scopeCheck(data: PolicyData, kind: EdgeKind, scope: Scope): { problems: string[]; dead: boolean } {
  const problems: string[] = [];
  if (kind === 'preempts') return { problems, dead: false };
  let dead = false;
  if (kind !== 'owns') {
    const catalogue = data.writ.actions;
    let bad = 0;
    for (const action of scope.actions) {
      if (action !== '*' && !Object.hasOwn(catalogue, action)) {
        const actions = Object.keys(catalogue).sort();
        problems.push(`scope.actions: "${action}" is not an action of the policy (data.writ.actions: ${actions.join(', ')})${didYouMean(action, actions)}`);
        bad += 1;
      }
    }
    dead ||= bad === scope.actions.length;
  }
  let badPatterns = 0;
  for (const pattern of scope.resources) {
    // Keys are rewritten before anything is matched, so a pattern under an alias matches none (even
    // where a broad class such as `**` overlaps it).
    const alias = aliasOf(data, pattern);
    const reached = data.writ.resource_classes.filter((rule) => patternsOverlap(rule.pattern, pattern));
    // A pattern spelt otherwise than keys are (not NFC, a host in capitals) matches none of them: the
    // graph's API refuses it (normalizeScope, checkScopeApplies); an edge stored before is reported.
    const nfc = nfcProblem(pattern, 'scope.resources: resource pattern');
    const host = hostInCapitals(reached, pattern);
    if (nfc) {
      problems.push(`${nfc}: the edge would never apply`);
      badPatterns += 1;
    } else if (host) {
      problems.push(`scope.resources: ${hostProblem(host, pattern, 'resource pattern', 'the edge would never apply to those keys: write')}`);
      // Dead only where every class it reaches reads a segment it spells in capitals as a host.
      if (reached.every((rule) => hostInCapitals([rule], pattern) !== null)) badPatterns += 1;
    } else if (alias) {
      problems.push(`scope.resources: "${pattern}" is written with the alias "${alias.from}", and keys are matched as "${alias.to}": write "${alias.to}${pattern.slice(alias.from.length)}"`);
      badPatterns += 1;
    } else if (reached.length === 0) {
      problems.push(`scope.resources: "${pattern}" matches no key of any resource class (data.writ.resource_classes: ${data.writ.resource_classes.map((r) => r.pattern).join(', ')}), so the edge would never apply`);
      badPatterns += 1;
    }
  }
  dead ||= badPatterns === scope.resources.length;
  if (kind !== 'owns') {
    let bad = 0;
    for (const environment of scope.environments) {
      const problem = environment === '*' ? null : environmentProblem(data, environment, 'scope.environments');
      if (problem !== null) {
        problems.push(problem);
        bad += 1;
      }
    }
    dead ||= bad === scope.environments.length;
  }
  if (kind !== 'approves') {
    const fields = fieldsProblems(data, scope);
    problems.push(...fields.problems);
    dead ||= fields.dead;
  }
  return { problems, dead };
}

/**
 * A scope's fields that no resource class its patterns reach has, where those classes close their
 * fields (unknownFields). Patterns that reach no class are left to the resources' problems. Dead when
 * the scope names fields and none is known.
 */
function fieldsProblems(data: PolicyData, scope: Scope): { problems: string[]; dead: boolean } {
  if (scope.fields.includes('*')) return { problems: [], dead: false };
  const unknown = unknownFields(data, scope.resources, scope.fields);
  const problems = unknown.map((u) => `scope.fields: "${u.field}" is not a field of ${u.classes}, whose fields are closed (fields_closed), so the edge would never apply to it${didYouMean(u.field, u.known)}`);
  return { problems, dead: scope.fields.length > 0 && unknown.length === scope.fields.length };
}

/**
 * The fields (other than `*`) that no resource class reached from `patterns` (keys or patterns) has,
 * where every class a pattern reaches closes its fields (`fields_closed`), in the given order: a field
 * is known for a pattern when some class overlapping it is open or lists it, so this refuses nothing
 * the policy, which judges by the one class that governs a key, would allow. Patterns that reach no
 * class are ignored (they are a problem of their own). Each comes with the classes reached (with their
 * fields, for a message) and the fields they list (for the closest name).
 */
function unknownFields(data: PolicyData, patterns: readonly string[], fields: readonly string[]): { field: string; classes: string; known: string[] }[] {
  const reach = patterns.map((p) => data.writ.resource_classes.filter((rule) => patternsOverlap(rule.pattern, p))).filter((rules) => rules.length > 0);
  if (reach.length === 0) return [];
  const out: { field: string; classes: string; known: string[] }[] = [];
  for (const field of fields) {
    if (field === '*' || reach.some((rules) => rules.some((rule) => rule.fields_closed !== true || Object.hasOwn(rule.fields ?? {}, field)))) continue;
    const classes = [...new Set(reach.flat())];
    out.push({
      field,
      classes: classes.map((rule) => `${rule.pattern} (${Object.keys(rule.fields ?? {}).sort().join(', ')})`).join(', '),
      known: [...new Set(classes.flatMap((rule) => Object.keys(rule.fields ?? {})))].sort(),
    });
  }
  return out;
}

/**
 * Throws UNPROCESSABLE for requested fields the resource (a key, or a pattern for a search) cannot
 * have: its resource classes close their fields and list none of these (unknownFields), naming each
 * with the closest name. A misspelt field would otherwise be denied by the policy, or under an open
 * class granted as written.
 */
export function checkFields(data: PolicyData, resource: string, fields: readonly string[], where: string): void {
  checkFieldSpelling(fields, where);
  const unknown = unknownFields(data, [resource], fields);
  if (unknown.length === 0) return;
  throw new WritError('UNPROCESSABLE', unknown.map((u) => `${where}: "${u.field}" is not a field of ${resource}: its resource class ${u.classes} closes its fields (fields_closed)${didYouMean(u.field, u.known)}`).join('; '));
}

/**
 * Throws UNPROCESSABLE for a field name not in Unicode NFC (nfcProblem): a field is part of its
 * coordination key (`wp:post:1#title`), so its NFD spelling would be a second key for one field; and for
 * one holding a separator of Writ-Fencing-Epoch (FENCING_SEPARATORS).
 */
export function checkFieldSpelling(fields: readonly string[], where: string): void {
  for (const field of fields) {
    const problem = nfcProblem(field, `${where}: field`);
    if (problem) throw new WritError('UNPROCESSABLE', problem);
    // Its key is sent upstream in Writ-Fencing-Epoch, whose pairs these separate: R#x=1,R would read as R#x and R.
    if (FENCING_SEPARATORS.test(field)) {
      throw new WritError('UNPROCESSABLE', `${where}: a field name cannot contain "," or ";": its coordination key (resource#field) would read as other keys in Writ-Fencing-Epoch${field.length <= ECHO_LIMIT ? ` (${JSON.stringify(field)})` : ''}`);
    }
  }
}

/**
 * Why an environment cannot be used, or null: the policy declares its environments (`data.writ.environments`)
 * and this is not one. In a scope it would never match a request, and a request in it would find no scope
 * (`prodution`). Without the list any name is taken as written.
 */
export function environmentProblem(data: PolicyData, environment: string, where: string): string | null {
  const environments = data.writ.environments;
  if (environments === undefined || environments.includes(environment)) return null;
  return `${where}: "${environment}" is not an environment of the policy (data.writ.environments: ${environments.join(', ')})${didYouMean(environment, environments)}`;
}

/** Throws UNPROCESSABLE for an environment the policy does not declare (environmentProblem). */
export function checkEnvironment(data: PolicyData, environment: string, where: string): void {
  const problem = environmentProblem(data, environment, where);
  if (problem !== null) throw new WritError('UNPROCESSABLE', problem);
}
