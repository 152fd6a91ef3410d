/**
 * A JSON Schema check whose problems read as sentences naming their place, for documents people write
 * by hand (the policy data, graph manifests): every problem at once, in document order, each with the
 * path to it (`data.writ.actions.update_post.risk`, `delegations[0] (d-bot).scope`) and the value found.
 */
import { Ajv, type ErrorObject } from 'ajv';
import { closestMatch } from 'leven';

export interface SchemaCheckOptions {
  /** How the path to a value of `doc` is written (segments as in the document; array indexes as digit strings). */
  place(segments: string[], doc: unknown): string;
  /** What a string failing `pattern` lacks (default: "does not match PATTERN"). */
  patternProblem?(pattern: string): string;
}

/** Compiles `schema` (strict ajv, all errors) on first use; the checker answers the problems of a document, empty when it is valid. */
export function schemaChecker(schema: object, options: SchemaCheckOptions): (doc: unknown) => string[] {
  let validate: ReturnType<Ajv['compile']> | null = null;
  return (doc) => {
    validate ??= new Ajv({ allErrors: true, strict: true, verbose: true }).compile(schema);
    if (validate(doc)) return [];
    const errors = validate.errors ?? [];
    // An `anyOf` that fails also reports each branch's own failure. When the value is of a branch's
    // type and fails it otherwise (a string too long), that failure says what is wrong; when it is of
    // none of them, the anyOf's one sentence does ("must be an RFC 3339 time, ms … or null").
    const hidden = new Set<ErrorObject>();
    for (const a of errors.filter((e) => e.keyword === 'anyOf')) {
      const branches = anyOfBranches(errors, a);
      const telling = branches.filter((e) => e.keyword !== 'type');
      for (const e of telling.length > 0 ? [a, ...branches.filter((b) => b.keyword === 'type')] : branches) hidden.add(e);
    }
    // A bad property name is reported twice (its own keyword, then `propertyNames`): the first says which.
    return errors.filter((e) => e.keyword !== 'propertyNames' && !hidden.has(e)).map((e) => describe(doc, e, options));
  };
}

/** The errors each branch of a failed `anyOf` reported about the same value (ajv reports them before the anyOf's own). */
export function anyOfBranches<E extends Pick<ErrorObject, 'instancePath' | 'schemaPath'>>(errors: readonly E[], anyOf: E): E[] {
  return errors.filter((e) => e !== anyOf && e.instancePath === anyOf.instancePath && e.schemaPath.startsWith(`${anyOf.schemaPath}/`));
}

/** Path segments written as a JavaScript-like path: `.name` for properties, `[i]` for indexes. */
export function dottedPath(segments: string[]): string {
  return segments.map((s) => (/^\d+$/.test(s) ? `[${s}]` : `.${s}`)).join('');
}

function describe(doc: unknown, e: ErrorObject, options: SchemaCheckOptions): string {
  const segments = e.instancePath.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const where = options.place(segments, doc);
  const params = e.params as Record<string, unknown>;
  const value = JSON.stringify(valueAt(doc, segments));
  const patternProblem = (pattern: unknown) => options.patternProblem?.(String(pattern)) ?? `does not match ${String(pattern)}`;
  switch (e.keyword) {
    case 'required':
      return `${where}: "${String(params.missingProperty)}" is missing`;
    case 'additionalProperties': {
      const known = Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {});
      return `${where}: unknown property "${String(params.additionalProperty)}"${didYouMean(String(params.additionalProperty), known)}`;
    }
    case 'enum': {
      const allowed = params.allowedValues as unknown[];
      const found = valueAt(doc, segments);
      return `${where}: ${value} is not one of ${allowed.join(', ')}${typeof found === 'string' ? didYouMean(found, allowed.filter((v) => typeof v === 'string')) : ''}`;
    }
    case 'pattern':
      return e.propertyName === undefined ? `${where}: ${value} ${patternProblem(params.pattern)}` : `${where}: the name ${JSON.stringify(e.propertyName)} ${patternProblem(params.pattern)}`;
    case 'anyOf': {
      const kinds = (e.schema as { type?: unknown; description?: unknown }[]).map((branch) => String(branch.description ?? branch.type));
      return `${where} must be ${kinds.slice(0, -1).join(', ')}${kinds.length > 1 ? ' or ' : ''}${kinds.at(-1) ?? ''} (found ${value})`;
    }
    default:
      return `${where} ${e.message ?? 'is not valid'} (found ${value})`;
  }
}

/**
 * ` (did you mean "fields"?)` when one candidate is a likely typo of `found`, else nothing: a few edits
 * away (one for a name of up to 3 characters, so `ttl` is not taken for `to`; two — a transposition —
 * up to 6; a third of its length beyond), or the start of it (`expires` for `expires_at`).
 */
export function didYouMean(found: string, candidates: string[]): string {
  const maxDistance = found.length <= 3 ? 1 : Math.max(2, Math.floor(found.length / 3));
  const match = closestMatch(found, candidates, { maxDistance }) ?? (found.length >= 4 ? candidates.find((c) => c.startsWith(found)) : undefined);
  return match === undefined ? '' : ` (did you mean "${match}"?)`;
}

function valueAt(doc: unknown, segments: string[]): unknown {
  let v = doc;
  for (const s of segments) v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[s] : undefined;
  return v;
}
