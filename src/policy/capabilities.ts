/** The capabilities file `opa build` gets: the opa in use, cut down to what opa-wasm can run. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { WritError } from '../errors.js';
import { WASM_ALLOWED_BUILTINS } from './wasm-builtins.js';

const run = promisify(execFile);

export interface Capabilities {
  builtins: { name: string }[];
  [k: string]: unknown;
}

export async function wasmCapabilities(opaPath: string): Promise<Capabilities> {
  return wasmCapabilitiesOf(await opaCapabilities(opaPath));
}

/** Everything the opa in use offers (`opa capabilities --current`). */
export async function opaCapabilities(opaPath: string): Promise<Capabilities> {
  let stdout: string;
  try {
    ({ stdout } = await run(opaPath, ['capabilities', '--current'], { maxBuffer: 64 * 1024 * 1024 }));
  } catch (e) {
    throw new WritError('POLICY_UNAVAILABLE', `cannot run \`${opaPath} capabilities --current\`: ${opaMessage(e)}`);
  }
  return JSON.parse(stdout) as Capabilities;
}

export function wasmCapabilitiesOf(current: Capabilities): Capabilities {
  return { ...current, builtins: current.builtins.filter((b) => WASM_ALLOWED_BUILTINS.has(b.name)) };
}

export function opaMessage(e: unknown): string {
  const err = e as { stderr?: string; stdout?: string; message?: string };
  return (err.stderr || err.stdout || err.message || String(e)).trim();
}
