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
    return (route) => (route.httpPart === 'querystring' ? coercing : strict)(route);
  };
}
