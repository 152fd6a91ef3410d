import { WritClient } from '../../src/sdk/index.js';
import { readAdminCredential } from '../../src/service/index.js';
import { fixtureKey } from '../support/harness.js';
import type { ServerProcess } from '../support/server-process.js';

/** SDK test helpers over a real `writ serve` process. */

export interface SentRequest {
  method: string;
  path: string;
}

/** A client for a fixture principal; `sent` records every request it sends (method and path). */
export function clientFor(server: ServerProcess, principal: string, fetchImpl: typeof fetch = fetch): { client: WritClient; sent: SentRequest[] } {
  const sent: SentRequest[] = [];
  const recording: typeof fetch = (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    sent.push({ method: init?.method ?? 'GET', path: url.pathname });
    return fetchImpl(input, init);
  };
  return { client: new WritClient({ baseUrl: server.url, principal, privateJwk: fixtureKey(principal), fetch: recording }), sent };
}

/** The post's current revision in the sample upstream (0 when it does not exist yet). */
export async function revisionOf(server: ServerProcess, postId: string): Promise<number> {
  const res = await fetch(`${server.upstreamUrl}/posts/${postId}`);
  if (res.status === 404) return 0;
  return ((await res.json()) as { revision: number }).revision;
}

/** Requests the sample upstream received for one post (refused ones too). */
export async function upstreamRequests(server: ServerProcess, postId: string): Promise<{ principal: string | null; method: string }[]> {
  const body = (await (await fetch(`${server.upstreamUrl}/requests?post=${postId}`)).json()) as { requests?: { principal: string | null; method: string }[] } | { principal: string | null; method: string }[];
  return Array.isArray(body) ? body : body.requests ?? [];
}

export interface LeaseView {
  key: string;
  holderIdentity: string | null;
  leaseId: string | null;
  renewTime: string | null;
  state: 'HELD' | 'EXPIRED' | 'FREE';
  epoch: number;
}

export async function leasesOn(client: WritClient, key: string): Promise<LeaseView[]> {
  return (await client.request<{ leases: LeaseView[] }>('GET', `/v1/leases?resource=${encodeURIComponent(key)}`)).leases;
}

/** Resolves with the signal's reason when it aborts; rejects if it has not aborted within `withinMs` (a generous bound, not a timing claim). */
export function aborted(signal: AbortSignal, withinMs: number): Promise<unknown> {
  if (signal.aborted) return Promise.resolve(signal.reason);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the task's signal did not abort within ${withinMs} ms`)), withinMs);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve(signal.reason);
    }, { once: true });
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Governance's client on `server` (its admin.jwk). */
export function governanceOf(server: ServerProcess): WritClient {
  const admin = readAdminCredential(server.dataDir);
  return new WritClient({ baseUrl: server.url, principal: 'governance', privateJwk: admin.privateJwk as never });
}

/** Governance lets the publisher service run scheduled jobs (the catalogue's run_job action on job:**); answers governance's client. */
export async function grantPublisherJobs(server: ServerProcess): Promise<WritClient> {
  const governance = governanceOf(server);
  await governance.request('POST', '/v1/grants', {
    id: 'g-publisher-jobs', to: 'publisher', reason: 'the publisher runs the scheduled publishing jobs',
    scope: { actions: ['run_job'], resources: ['job:**'], environments: ['production'], fields: ['*'], risk_max: 1 },
  });
  return governance;
}
