import AjvCompiler from '@fastify/ajv-compiler';

/** How request bodies are validated: exactly as sent (no coercion, no defaults, nothing removed). */
export const STRICT_AJV_OPTIONS = { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } as const;

/**
 * Fastify's validator factory, with one difference: a query string is text, so its schema coerces
 * (`?limit=10` is the integer 10, `?limit=ten` is still refused). Bodies, params and headers keep the
 * app's strict options (JSON carries its own types; a string is never taken for a number there).
 */
export function queryCoercingValidator(): AjvCompiler.ValidatorFactory {
  const pool = AjvCompiler();
  return (externalSchemas, options) => {
    const strict = pool(externalSchemas, options);
    const custom = options && options.mode !== 'JTD' ? options.customOptions : undefined;
    const coercing = pool(externalSchemas, { ...options, mode: undefined, customOptions: { ...custom, coerceTypes: true } });
    return (route) => (route.httpPart === 'querystring' ? finiteOnly(coercing(route)) : strict(route));
  };
}

type Validate = ReturnType<ReturnType<AjvCompiler.ValidatorFactory>>;

/**
 * Ajv's coercion reads `Infinity`, `-Infinity` and `1e309` as numbers that pass `minimum`, `maximum`
 * and even `integer` (a `?limit=Infinity` lifted every page cap; `-Infinity` reached the store as a
 * 500). A coerced query holds no number that is not finite.
 */
function finiteOnly(validate: Validate): Validate {
  const checked = ((data: unknown, ...rest: unknown[]) => {
    const ok = (validate as (data: unknown, ...rest: unknown[]) => unknown)(data, ...rest);
    checked.errors = (validate as { errors?: unknown }).errors;
    if (ok !== true || typeof data !== 'object' || data === null) return ok;
    for (const [name, value] of Object.entries(data)) {
      if ((Array.isArray(value) ? value : [value]).some((v) => typeof v === 'number' && !Number.isFinite(v))) {
        checked.errors = [{ instancePath: `/${name}`, schemaPath: '#/finite', keyword: 'type', params: {}, message: 'must be a finite number' }];
        return false;
      }
    }
    return true;
  }) as ((data: unknown, ...rest: unknown[]) => unknown) & { errors?: unknown; schemaEnv?: unknown };
  checked.schemaEnv = (validate as { schemaEnv?: unknown }).schemaEnv;
  return checked as unknown as Validate;
}
