/**
 * The builtins a Writ policy may call: the ones OPA's wasm compiler implements natively plus the
 * ones `@open-policy-agent/opa-wasm` implements in JavaScript (node_modules/.../src/builtins/*.js).
 * The build hands `opa build` a capabilities file cut down to this list, so a policy that calls
 * anything else (http.send, time.format, net.cidr_expand, ...) fails to build instead of failing
 * a request at run time.
 *
 * The native list was derived from OPA v1.22.3 by compiling a policy that calls every builtin of
 * `opa capabilities --current` with `-t wasm` and keeping those absent from the module's
 * `builtins()` import table; test/policy/wasm-builtins.test.ts re-checks it against the opa in use.
 */

/** Language operators and internals the compiler always handles. */
export const WASM_OPERATORS = ['assign', 'eq', 'equal', 'internal.member_2', 'internal.member_3'] as const;

/** Implemented inside the wasm module (opa_* / builtin_* in OPA's wasm runtime). */
export const WASM_NATIVE_BUILTINS = [
  'abs', 'and', 'array.concat', 'array.flatten', 'array.reverse', 'array.slice',
  'base64.decode', 'base64.encode', 'base64.is_valid', 'base64url.decode', 'base64url.encode',
  'bits.and', 'bits.lsh', 'bits.negate', 'bits.or', 'bits.rsh', 'bits.xor',
  'ceil', 'concat', 'contains', 'count', 'div', 'endswith', 'floor', 'format_int',
  'glob.match', 'graph.reachable', 'gt', 'gte', 'indexof', 'intersection',
  'is_array', 'is_boolean', 'is_null', 'is_number', 'is_object', 'is_set', 'is_string',
  'json.filter', 'json.is_valid', 'json.marshal', 'json.remove', 'json.unmarshal',
  'lower', 'lt', 'lte', 'max', 'min', 'minus', 'mul', 'neq',
  'net.cidr_contains', 'net.cidr_intersects', 'numbers.range',
  'object.filter', 'object.get', 'object.keys', 'object.remove', 'object.union', 'object.union_n',
  'or', 'plus', 'product',
  'regex.find_all_string_submatch_n', 'regex.is_valid', 'regex.match',
  'rego.metadata.chain', 'rego.metadata.rule', 'rem', 'replace', 'round',
  'sort', 'split', 'startswith', 'strings.replace_n', 'strings.reverse', 'substring', 'sum',
  'to_number', 'trim', 'trim_left', 'trim_prefix', 'trim_right', 'trim_space', 'trim_suffix',
  'type_name', 'union', 'upper', 'walk',
] as const;

/** Imported by the wasm module and implemented by the opa-wasm npm package in JavaScript. */
export const WASM_SDK_BUILTINS = ['regex.split', 'sprintf', 'yaml.is_valid', 'yaml.marshal', 'yaml.unmarshal'] as const;

export const WASM_ALLOWED_BUILTINS: ReadonlySet<string> = new Set<string>([
  ...WASM_OPERATORS,
  ...WASM_NATIVE_BUILTINS,
  ...WASM_SDK_BUILTINS,
]);
