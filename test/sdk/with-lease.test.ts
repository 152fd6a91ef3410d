import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseExpiredError, LeasePreemptedError, StaleFencingEpochError, WritApiError, type Lease, type Receipt } from '../../src/sdk/index.js';
import { WIRE_TIME } from '../support/wire-times.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { aborted, clientFor, leasesOn, revisionOf, sleep, upstreamRequests, type LeaseView } from './sdk-support.js';

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
});
afterAll(async () => server?.stop());

const titleDecision = { action: 'update_post', environment: 'production', fields: ['title'] };

describe('withLease against a running Writ', () => {
  it('background renewal keeps a 1 s lease through a 2.5 s task: same holder and lease id throughout, renewTime advances, the write completes', async () => {
    const { client } = clientFor(server, 'seo-agent-7');
    const resource = 'wp:post:501';
    const decision = await client.decide({ ...titleDecision, resource });
    expect(decision.allow, decision.reasons.join('; ')).toBe(true);
    const version = await revisionOf(server, '501');

    const seen: LeaseView[] = [];
    let leaseId = '';
    let key = '';
    let abortedDuringTask = false;
    let held: Lease | null = null;
    let firstExpiry = '';
    const receipt: Receipt = await client.withLease([decision], async ({ act, signal, lease }) => {
      held = lease;
      firstExpiry = lease!.expires_at;
      leaseId = lease!.lease_id;
      key = lease!.keys[0]!;
      const started = Date.now();
      while (Date.now() - started < 2_500) {
        seen.push(...(await leasesOn(client, key)));
        await sleep(250);
      }
      abortedDuringTask = signal.aborted;
      return act({ decision, action: 'update_post', resource, fields: ['title'], payload: { title: 'kept through renewal' }, expected_version: version });
    }, { ttlMs: 1_000 });

    expect(abortedDuringTask).toBe(false);
    expect(receipt.status).toBe('COMPLETED');
    // Times are RFC 3339 strings: the receipt's, and the lease's expiry, which each renewal moved on.
    expect(receipt.created_at).toMatch(WIRE_TIME);
    expect(receipt.entries.every((e) => WIRE_TIME.test(e.at))).toBe(true);
    expect(firstExpiry).toMatch(WIRE_TIME);
    expect(held!.expires_at).toMatch(WIRE_TIME);
    expect(Date.parse(held!.expires_at) - Date.parse(firstExpiry)).toBeGreaterThan(1_000);
    expect(key).toBe(`${resource}#title`);
    expect(seen.length).toBeGreaterThanOrEqual(5);
    for (const record of seen) {
      expect(record).toMatchObject({ key, holderIdentity: 'seo-agent-7', leaseId, state: 'HELD' });
    }
    const renewTimes = seen.map((r) => Date.parse(r.renewTime!));
    for (let i = 1; i < renewTimes.length; i++) expect(renewTimes[i]).toBeGreaterThanOrEqual(renewTimes[i - 1]!);
    // A 2.5 s task on a 1 s lease needs at least two renewals; each moves renewTime forward.
    expect(new Set(renewTimes).size).toBeGreaterThanOrEqual(3);
    // The task outlived the first TTL, so the lease was really extended, not merely long.
    expect(renewTimes.at(-1)! - renewTimes[0]!).toBeGreaterThan(1_000);

    const after = await leasesOn(client, key);
    expect(after[0]).toMatchObject({ key, state: 'FREE' });
  });

  it('act in a scope taken for one decision needs only the payload: the decision, action, key and fields are the decision\'s (also from its token); a scope of several decisions asks which', async () => {
    const { client } = clientFor(server, 'seo-agent-7');
    const decision = await client.decide({ ...titleDecision, resource: 'wp:post:592' });
    expect(decision.allow, decision.reasons.join('; ')).toBe(true);
    const first = await client.withLease([decision], ({ act }) => act({ payload: { title: 'short form' }, expected_version: 0 }));
    expect(first).toMatchObject({ status: 'COMPLETED', action: 'update_post', resource_key: 'wp:post:592', fields: ['title'] });
    // A token alone: what it allows is read from its claims.
    const again = await client.decide({ ...titleDecision, resource: 'wp:post:592' });
    const second = await client.withLease([again.token!], ({ act }) => act({ payload: { title: 'from the token' }, expected_version: 1 }));
    expect(second).toMatchObject({ status: 'COMPLETED', resource_key: 'wp:post:592' });
    // Two decisions: the write must say which one allows it (a TypeError before anything is sent).
    const body = await client.decide({ ...titleDecision, fields: ['meta_description'], resource: 'wp:post:593' });
    const other = await client.decide({ ...titleDecision, resource: 'wp:post:593' });
    await expect(client.withLease([body, other], ({ act }) => act({ payload: { title: 'which?' }, expected_version: 0 }))).rejects.toThrow(/this lease was taken for 2 decisions: name the one that allows this write/);
    // From plain JavaScript, a write without its decision is a TypeError naming it (not a crash inside the SDK).
    await expect(client.act({ payload: { title: 'x' } } as never)).rejects.toThrow('act: `decision` is required');
    expect(await upstreamRequests(server, '593')).toEqual([]);
  });

  it('a lease released behind the SDK\'s back aborts the task with LeaseExpiredError, and a later scope.act never reaches Writ nor the upstream', async () => {
    const { client, sent } = clientFor(server, 'seo-agent-7');
    const { client: sideChannel } = clientFor(server, 'seo-agent-7');
    const resource = 'wp:post:502';
    const decision = await client.decide({ ...titleDecision, resource });
    const version = await revisionOf(server, '502');

    const outcome = await client.withLease([decision], async ({ act, signal, lease }) => {
      await sideChannel.releaseLease(lease!);
      const reason = await aborted(signal, 5_000);
      const actionsBefore = sent.filter((r) => r.path === '/v1/actions').length;
      const write = await act({ decision, action: 'update_post', resource, fields: ['title'], payload: { title: 'must not land' }, expected_version: version }).then(
        () => null,
        (e: unknown) => e,
      );
      return { reason, write, actionsBefore };
      // A 6 s TTL: the first renewal (at 2 s) meets the refusal, long before the SDK's own expiry
      // watchdog (6 s) could abort, so the abort must come from Writ's answer.
    }, { ttlMs: 6_000 });

    expect(outcome.reason).toBeInstanceOf(LeaseExpiredError);
    expect((outcome.reason as WritApiError).code).toBe('LEASE_EXPIRED');
    expect((outcome.reason as WritApiError).status).toBe(423);
    expect(outcome.write).toBe(outcome.reason);
    expect(outcome.actionsBefore).toBe(0);
    expect(sent.filter((r) => r.path === '/v1/actions')).toEqual([]);
    expect((await upstreamRequests(server, '502')).filter((r) => r.principal === 'seo-agent-7')).toEqual([]);
  });

  it('when renewals cannot reach Writ, the task is aborted with LeaseExpiredError once the lease would have expired', async () => {
    let partitioned = false;
    const flaky: typeof fetch = (input, init) => {
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      if (partitioned && url.includes('/renew')) return Promise.reject(new TypeError('fetch failed (simulated partition)'));
      return fetch(input, init);
    };
    const { client, sent } = clientFor(server, 'seo-agent-7', flaky);
    const resource = 'wp:post:503';
    const decision = await client.decide({ ...titleDecision, resource });

    const reason = await client.withLease([decision], async ({ signal }) => {
      partitioned = true;
      return aborted(signal, 8_000);
    }, { ttlMs: 1_000 });
    partitioned = false;

    expect(reason).toBeInstanceOf(LeaseExpiredError);
    // It kept trying: a transport failure is not a verdict that the lease is gone.
    expect(sent.filter((r) => r.path.endsWith('/renew')).length).toBeGreaterThanOrEqual(2);
  });

  it('a write refused because the lease was taken over aborts the task\'s signal at once, not at the next renewal, and nothing is released', async () => {
    const { client: rc, sent: rcSent } = clientFor(server, 'release-controller');
    const { client: ic } = clientFor(server, 'incident-commander');
    const resource = 'deploy:site:fenced-out';
    const rcDecision = await rc.decide({ action: 'deploy', resource, environment: 'production', fields: [] });
    const incidentId = `inc-${randomUUID().slice(0, 8)}`;
    try {
      const seen = await rc.withLease([rcDecision], async ({ signal, act }) => {
        const declare = await ic.decide({ action: 'declare_incident', resource: `incident:${incidentId}`, environment: 'production', fields: [] });
        await ic.request('POST', '/v1/incidents', { id: incidentId, reason: 'site down; taking over the release', decision: declare.token });
        const icDecision = await ic.decide({ action: 'deploy', resource, environment: 'production', fields: [] });
        await ic.acquireLease([icDecision], { ttlMs: 5_000, preempt: true });
        // The next renewal is 5 s away (a third of 15 s): only the write can tell the task now.
        const refused = await act({ payload: {}, expected_version: 0 }).then(() => null, (e: unknown) => e);
        return { refused, abortedAtOnce: signal.aborted, reason: signal.reason as unknown };
      }, { ttlMs: 15_000 });
      expect(seen.refused).toBeInstanceOf(StaleFencingEpochError);
      expect(seen.abortedAtOnce).toBe(true);
      expect(seen.reason).toBe(seen.refused);
      expect(rcSent.filter((r) => r.method === 'DELETE')).toEqual([]);
    } finally {
      await ic.request('DELETE', `/v1/incidents/${incidentId}`).catch(() => undefined);
    }
  });

  it('an incident commander who preempts the release-controller\'s lease aborts its task with LEASE_PREEMPTED and gets the next epoch', async () => {
    const { client: rc, sent: rcSent } = clientFor(server, 'release-controller');
    const { client: ic } = clientFor(server, 'incident-commander');
    const resource = 'deploy:site:www';
    const rcDecision = await rc.decide({ action: 'deploy', resource, environment: 'production', fields: [] });
    expect(rcDecision.allow, rcDecision.reasons.join('; ')).toBe(true);

    const incidentId = `inc-${randomUUID().slice(0, 8)}`;
    let takeover: { epochs: Record<string, number>; keys: string[] } | undefined;
    const { reason, epochs } = await rc.withLease([rcDecision], async ({ signal, lease }) => {
      const declare = await ic.decide({ action: 'declare_incident', resource: `incident:${incidentId}`, environment: 'production', fields: [] });
      expect(declare.allow, declare.reasons.join('; ')).toBe(true);
      await ic.request('POST', '/v1/incidents', { id: incidentId, reason: 'site down; taking over the release', decision: declare.token });
      const icDecision = await ic.decide({ action: 'deploy', resource, environment: 'production', fields: [] });
      takeover = await ic.acquireLease([icDecision], { ttlMs: 5_000, preempt: true });
      return { reason: await aborted(signal, 5_000), epochs: lease!.epochs };
    }, { ttlMs: 1_500 });

    try {
      expect(reason).toBeInstanceOf(LeasePreemptedError);
      expect((reason as WritApiError).code).toBe('LEASE_PREEMPTED');
      expect(takeover!.keys).toEqual(Object.keys(epochs));
      for (const k of takeover!.keys) expect(takeover!.epochs[k]).toBe(epochs[k]! + 1);
      const [record] = await leasesOn(ic, takeover!.keys[0]!);
      expect(record).toMatchObject({ holderIdentity: 'incident-commander', state: 'HELD' });
      // The preempted holder does not try to release what is no longer its lease.
      expect(rcSent.filter((r) => r.method === 'DELETE')).toEqual([]);
    } finally {
      await ic.request('DELETE', `/v1/incidents/${incidentId}`).catch(() => undefined);
    }
  });
});
