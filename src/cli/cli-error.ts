/**
 * A failure `writ` explains in one line: it prints `writ: MESSAGE` (no stack trace) and exits with
 * `exitCode`. For what the user can fix (arguments, a port in use); a WritError is printed with its
 * code, and anything else (a bug) with its stack.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** A command given wrong arguments: exit code 2. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, 2);
  }
}

const EXIT_CODES = new WeakMap<object, number>();

/**
 * Marks a command's failure `e` (a WritError, a CliError other than a usage error, a bug) to exit with
 * `code` instead of its own, for a command whose exit 1 is a finding (`writ audit verify`: 1 is BROKEN,
 * 3 is could not check). A usage error keeps its 2. `code` undefined: `e` as it is.
 */
export function exitingWith(e: unknown, code: number | undefined): unknown {
  if (code !== undefined && typeof e === 'object' && e !== null && !(e instanceof UsageError)) EXIT_CODES.set(e, code);
  return e;
}

/** The exit code `e` was marked with (exitingWith), else `otherwise`. */
export function exitCodeOf(e: unknown, otherwise: number): number {
  return (typeof e === 'object' && e !== null ? EXIT_CODES.get(e) : undefined) ?? otherwise;
}
