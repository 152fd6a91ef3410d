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

/** The value of a port option: a whole number from `min` (0 lets the system pick) to 65,535, else a UsageError naming the option. */
export function portOption(option: string, value: string, min = 0): number {
  const n = /^\d{1,5}$/.test(value) ? Number(value) : NaN;
  if (!(n >= min && n <= 65_535)) throw new UsageError(`${option} must be a port number from ${min} to 65535${min === 0 ? ' (0: any free port)' : ''}, got "${value}"`);
  return n;
}
