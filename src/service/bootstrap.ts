import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { writePrivateFile } from '../decision/index.js';
import { join } from 'node:path';
import { generatePrincipalKeyPair } from '../wire/principal-keys.js';
import { GOVERNANCE_ID, type GraphEvent, type PublicJwk } from '../graph/model.js';
import { commitGraphChange } from './graph-changes.js';
import type { WritContext } from './context.js';
import { checkPublicKeys, publicPart } from './validate.js';
import { WritError } from '../errors.js';

export interface AdminCredential {
  principal: string;
  privateJwk: Record<string, unknown> & { kid: string };
}

export function adminCredentialPath(dataDir: string): string {
  return join(dataDir, 'admin.jwk');
}

/** Whether `keys` holds this very key (kid and key material, not the kid alone). */
function sameKeyIn(keys: readonly PublicJwk[], key: PublicJwk): boolean {
  return keys.some((k) => k.kid === key.kid && k.x === key.x && k.y === key.y);
}

/** The public half of the credential file at `path`; UNPROCESSABLE, naming it, for a file that is not a JWK. */
function credentialKey(path: string): PublicJwk {
  const why = notAJwk(path);
  if (why !== null) throw new WritError('UNPROCESSABLE', `the admin credential ${path} is not a JWK (${why}): restore it from a backup, or move it aside`);
  return publicPart(JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>);
}

/** Why the file at `path` cannot be read as a JWK (null: it can). */
function notAJwk(path: string): string | null {
  try {
    publicPart(JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

/** Whether the credential file at `path` is one of `keys` (false for a file that cannot be read as a JWK). */
function holdsKeyOf(keys: readonly PublicJwk[], path: string): boolean {
  try {
    return sameKeyIn(keys, credentialKey(path));
  } catch {
    return false;
  }
}

export function readAdminCredential(dataDir: string): AdminCredential {
  const path = adminCredentialPath(dataDir);
  return { principal: GOVERNANCE_ID, privateJwk: JSON.parse(readFileSync(path, 'utf8')) };
}

/**
 * The store's first open (no governance in its graph yet): creates the governance root principal and
 * its admin credential (a private JWK, mode 0600, in the data directory), or registers the one found
 * there (another process's starting at the same moment, or one an operator put there). Once governance
 * exists, nothing is made or registered, whatever the data directory holds (`missing`: it holds no
 * credential): a command run elsewhere against a shared store must neither mint a governance key nor
 * register a stray file's. Adding a governance key (after losing the credential) is an explicit act:
 * `writ keys add-governance FILE` (addGovernanceKey).
 */
export async function ensureGovernance(ctx: WritContext): Promise<{ credentialPath: string; created: boolean; missing: boolean; unregistered: boolean; unreadable?: string }> {
  const path = adminCredentialPath(ctx.config.dataDir);
  const graph = await ctx.graph.current();
  const existing = graph.principal(GOVERNANCE_ID);
  // Governance exists: nothing is made or registered, whatever file is there (a stray admin.jwk of another
  // store must not become a governance key of this one). Adding a key is `writ keys add-governance FILE`.
  if (existing) {
    const unreadable = existsSync(path) ? notAJwk(path) : null;
    return { credentialPath: path, created: false, missing: !existsSync(path), unregistered: unreadable === null && existsSync(path) && !holdsKeyOf(existing.keys, path), ...(unreadable !== null ? { unreadable } : {}) };
  }
  let publicJwk: PublicJwk;
  let created = false;
  if (existsSync(path)) {
    publicJwk = credentialKey(path);
  } else {
    // A random part: two processes starting in one millisecond must not make two keys under one kid.
    const pair = await generatePrincipalKeyPair(`governance-${ctx.clock.now().toString(36)}-${randomBytes(4).toString('hex')}`);
    try {
      // On PostgreSQL nothing else makes the data directory (a first command run from a new one).
      mkdirSync(ctx.config.dataDir, { recursive: true, mode: 0o700 });
      writePrivateFile(path, JSON.stringify(pair.privateJwk, null, 2), { overwrite: false });
      publicJwk = pair.publicJwk as PublicJwk;
      created = true;
    } catch (e) {
      // Another process sharing the data directory (a replica starting at the same moment) made it first: use its.
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      publicJwk = credentialKey(path);
    }
  }
  await commitGraphChange(ctx, 'bootstrap', (g, now) => {
    // Else another process created it meanwhile (with its own credential, or this same file's).
    return g.principal(GOVERNANCE_ID) ? [] : [governanceCreated(ctx, publicJwk, now)];
  });
  if (!sameKeyIn((await ctx.graph.current()).principal(GOVERNANCE_ID)!.keys, publicJwk)) {
    // Another process with another data directory created governance first, with its credential: the
    // one this call wrote is no governance key, so it does not stay to be taken for one.
    if (created) rmSync(path, { force: true });
    return { credentialPath: path, created: false, missing: !existsSync(path), unregistered: existsSync(path) };
  }
  return { credentialPath: path, created, missing: false, unregistered: false };
}

/** The event that creates the governance root principal with its one key. */
function governanceCreated(ctx: WritContext, key: PublicJwk, now: number): GraphEvent {
  return {
    type: 'principal.created',
    principal: {
      id: GOVERNANCE_ID, kind: 'governance', priority_class: 'governance', priority: ctx.config.priorities.governance ?? 90,
      attributes: { description: 'root authority' }, keys: [key], created_at: now,
    },
  };
}

/**
 * Registers the public half of `jwk` as one more key of governance (`writ keys add-governance FILE`),
 * as `actor`: after the admin credential was lost, with a key pair made by `writ keys new`. On a store
 * with no governance yet (opened without bootstrapping it) it creates governance with this key as its
 * only one (`created`), and no credential is written anywhere: the operator keeps the private half; when
 * another process creates governance meanwhile, the key is added beside its key (`raced`). Refuses
 * a key already registered, and anything but a public or private Ed25519/P-256 JWK with a kid.
 */
export async function addGovernanceKey(ctx: WritContext, actor: string, jwk: Record<string, unknown>): Promise<{ kid: string; keys: string[]; graph_revision: number; created: boolean; raced: boolean }> {
  const publicJwk = checkPublicKeys([publicPart(jwk)])[0]!;
  let created = false;
  let sawNone = false;
  const revision = await commitGraphChange(ctx, actor, (g, now) => {
    const gov = g.principal(GOVERNANCE_ID);
    created = !gov;
    sawNone ||= !gov;
    if (!gov) return [governanceCreated(ctx, publicJwk, now)];
    if (gov.keys.some((k) => k.kid === publicJwk.kid)) throw new WritError('ALREADY_EXISTS', `governance already has a key ${publicJwk.kid}`);
    checkPublicKeys([...gov.keys, publicJwk]);
    return [{ type: 'principal.keys_set', id: GOVERNANCE_ID, keys: [...gov.keys, publicJwk] }];
  });
  const keys = (await ctx.graph.current()).principal(GOVERNANCE_ID)!.keys.map((k) => k.kid);
  // `raced`: there was no governance when it began, and another process created it first (with its own key).
  return { kid: publicJwk.kid, keys, graph_revision: revision, created, raced: sawNone && !created };
}
