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
