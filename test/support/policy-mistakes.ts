/**
 * Rego a policy author might write by mistake, for the tests of what Writ does with it: it compiles
 * (opa build cannot refuse it) and fails only on the inputs that reach it.
 */

/** Where this domain rule goes under a policies folder. */
export const TWO_VALUES_FILE = 'writ/authz/domain/two_values.rego';

/**
 * Two values for one complete rule when both bodies hold: a request in production with the title
 * field fails with `var assignment conflict`; others are judged (in production, denied "strict").
 */
export const TWO_VALUES_RULE = [
  'package writ.authz.domain.two_values',
  '',
  'level := "strict" if input.request.environment == "production"',
  '',
  'level := "loose" if "title" in input.request.fields',
  '',
  'deny contains "strict" if level == "strict"',
  '',
].join('\n');
