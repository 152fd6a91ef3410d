import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { loadConfig } from '../../src/config/index.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { openWrit, readAdminCredential } from '../../src/service/index.js';
import { generateImpactGraph } from '../../bench/impact-graph.js';
import { onFreePort, spawnListening } from '../../scripts/server-process.js';
import { WritApiError, WritClient } from '../../src/sdk/index.js';
import { fixtureKey, REPO } from '../support/harness.js';
import { CLI, startServerProcess, type ServerProcess } from '../support/server-process.js';
import { findOpa } from '../../src/cli/opa.js';
import { buildPolicyBundle } from '../../src/policy/index.js';
import { TWO_VALUES_FILE, TWO_VALUES_RULE } from '../support/policy-mistakes.js';

/**
 * The console in a real headless browser: Debian's chromium (scripts/ensure-chromium.sh installs it),
 * driven by playwright-core (never a downloaded browser), against a real `writ serve` on the example
 * graph, with receipts written by agents through the SDK. Screenshots of every view, wide and narrow,
 * go to build/console-screenshots/.
 */
// Run inside the page by page.evaluate (this program's types are Node's, not the DOM's).
declare const document: any;
declare const getComputedStyle: (el: unknown) => { outlineStyle: string };

const CHROMIUM = process.env.WRIT_CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = join(REPO, 'build/console-screenshots');
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let server: ServerProcess;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let loginLink: string;
/** The graph revisions around the delegation that is created and then revoked. */
let beforeTemp: number;
/** The server's own bundle folder (a copy of build/policy), so that this file can publish a bundle it refuses. */
let bundleDir: string;
let head: number;
const cspViolations: string[] = [];
/** Waits for the page (10 s: the machines are shared and slow at times). */
const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 10_000, interval: 100 });

async function shoot(name: string, p: Page = page, scrollTo?: string): Promise<void> {
  await p.setViewportSize({ width: 1280, height: 800 });
  await p.waitForTimeout(300);
  if (scrollTo) await p.locator(scrollTo).evaluate((el: any) => el.scrollIntoView({ block: 'center' }));
  await p.screenshot({ path: join(SHOTS, `${name}-1280x800.png`), fullPage: false });
  await p.setViewportSize({ width: 400, height: 860 });
  await p.waitForTimeout(300);
  // A narrow screen reads the page without scrolling sideways: wide tables turn into cards.
  expect(await p.evaluate(() => document.documentElement.scrollWidth), `${name}: no sideways scroll at 400 px`).toBeLessThanOrEqual(400);
  await p.screenshot({ path: join(SHOTS, `${name}-400.png`), fullPage: true });
  await p.setViewportSize({ width: 1280, height: 800 });
}

function watch(p: Page): void {
  p.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) cspViolations.push(m.text());
  });
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) execFileSync('bash', [join(REPO, 'scripts/ensure-chromium.sh')], { stdio: 'inherit' });
  if (!existsSync(join(REPO, 'build/console/app.js'))) execFileSync(process.execPath, [join(REPO, 'scripts/build-console.mjs')], { stdio: 'inherit' });
  rmSync(SHOTS, { recursive: true, force: true });
  mkdirSync(SHOTS, { recursive: true });
  bundleDir = mkdtempSync(join(tmpdir(), 'writ-console-bundle-'));
  cpSync(join(REPO, 'build/policy'), bundleDir, { recursive: true });
  server = await startServerProcess({ consoleLink: true, env: { WRIT_BUNDLE_DIR: bundleDir } });
  const link = /(http:\/\/\S+\/console\/#login=\S+)/.exec(server.log());
  expect(link, 'writ serve prints the console login link').not.toBeNull();
  loginLink = link![1]!;

  // Agents write through the gateway, as in production: receipts for the timeline.
  const seo = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
  for (const post of ['wp:post:1024', 'wp:post:2048']) {
    const d = await seo.decide({ action: 'update_post', resource: post, environment: 'production', fields: ['title'] });
    const receipt = await seo.withLease([d], ({ act }) => act({ decision: d, action: 'update_post', resource: post, fields: ['title'], payload: { title: `New title of ${post}` }, expected_version: 0 }));
    expect(receipt.status).toBe('COMPLETED');
  }
  // A delegation given and then revoked: the time slider crosses both.
  const gov = new WritClient({ baseUrl: server.url, principal: 'governance', privateJwk: readAdminCredential(server.dataDir).privateJwk as never });
  const orchestrator = new WritClient({ baseUrl: server.url, principal: 'orchestrator', privateJwk: fixtureKey('orchestrator') });
  beforeTemp = (await (await fetch(`${server.url}/readyz`)).json() as { graph_revision: number }).graph_revision;
  await new Promise((r) => setTimeout(r, 20));
  await orchestrator.request('POST', '/v1/delegations', { id: 'd-orch-seo-staging', from: 'orchestrator', to: 'seo-agent-7', reason: 'staging rehearsal', max_depth: 0, scope: { actions: ['read_post'], resources: ['wp:post:*'], environments: ['staging'], fields: ['*'], risk_max: 1 } });
  await new Promise((r) => setTimeout(r, 20));
  await gov.request('DELETE', '/v1/edges/d-orch-seo-staging', { reason: 'rehearsal over' });
  head = (await (await fetch(`${server.url}/readyz`)).json() as { graph_revision: number }).graph_revision;
  expect(head).toBe(beforeTemp + 2);

  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, timezoneId: 'Europe/Paris', locale: 'en-GB' });
  page = await context.newPage();
  watch(page);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  if (server) rmSync(server.dataDir, { recursive: true, force: true });
  if (bundleDir) rmSync(bundleDir, { recursive: true, force: true });
});

describe('the console in a real browser', () => {
  it('signs in with the one-time link; the link fails the second time with LOGIN_LINK_SPENT', async () => {
    const res = await page.goto(loginLink);
    const csp = res!.headers()['content-security-policy']!;
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toMatch(/https?:/);
    await poll(() => page.locator('.session').textContent()).toContain('governance');
    // The header names the policy bundle deciding now (GET /readyz), and no refused rebuild.
    const ready = (await (await fetch(`${server.url}/readyz`)).json()) as { policy_revision: string };
    await poll(() => page.locator('.who .policy').textContent()).toBe(`policy ${ready.policy_revision.slice('sha256:'.length, 'sha256:'.length + 8)}`);
    expect(await page.locator('.policy-refused').count()).toBe(0);
    // The token left the address bar at once.
    expect(page.url()).not.toContain('login=');
    expect(page.url()).toMatch(/#\/receipts$/);
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === 'writ_console')!;
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
    expect(await page.evaluate(() => document.cookie)).not.toContain('writ_console');

    // Someone else opens the same link: refused, with the stable code.
    const other = await browser.newContext();
    const p2 = await other.newPage();
    watch(p2);
    await p2.goto(loginLink);
    await poll(() => p2.locator('.error').textContent()).toContain('LOGIN_LINK_SPENT');
    await shoot('sign-in-refused', p2);
    await other.close();

    // A link printed by the CLI, a different process sharing the store, works too (once).
    const out = execFileSync(process.execPath, [CLI, 'console', '--data-dir', server.dataDir, '--url', server.url, '--principal', 'seo-agent-7', '--json'], { cwd: REPO, encoding: 'utf8' });
    const cliLink = JSON.parse(out) as { url: string; auditor: boolean };
    expect(cliLink.auditor).toBe(false);
    const agent = await browser.newContext();
    const p3 = await agent.newPage();
    await p3.goto(cliLink.url);
    await poll(() => p3.locator('.session').textContent()).toContain('seo-agent-7');
    // Without an audit grant: its own receipts only, and no whole-graph view.
    await poll(() => p3.locator('#receipt-list').textContent()).toContain('seo-agent-7');
    await p3.goto(`${server.url}/console/#/graph`);
    await poll(() => p3.locator('.error').first().textContent()).toContain('FORBIDDEN');
    await agent.close();
  });

  it('the session cookie reads the public API but is refused any change (SESSION_READ_ONLY)', async () => {
    const r = await page.evaluate(async () => {
      const write = await fetch('/v1/delegations', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ from: 'orchestrator', to: 'seo-agent-7', reason: 'x', scope: { actions: ['read_post'], resources: ['wp:post:*'] } }) });
      const read = await fetch('/v1/receipts');
      return { write: write.status, code: ((await write.json()) as { code: string }).code, read: read.status };
    });
    expect(r).toEqual({ write: 403, code: 'SESSION_READ_ONLY', read: 200 });
  });

  it('opens a receipt from the timeline and shows its chain with the right edges', async () => {
    await page.goto(`${server.url}/console/#/receipts`);
    await poll(() => page.locator('#receipt-list tbody tr').count()).toBe(2);
    const [newest, oldest] = await page.locator('#receipt-list tbody tr td:nth-child(5)').allTextContents();
    expect([newest, oldest]).toEqual(['wp:post:2048', 'wp:post:1024']);
    expect(await page.locator('#live-status').textContent()).toContain('Live');
    // Live: an agent writes while the auditor watches; the receipt appears at the top, marked.
    const seo = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const d = await seo.decide({ action: 'update_post', resource: 'wp:post:4096', environment: 'production', fields: ['meta_description'] });
    const live = await seo.withLease([d], ({ act }) => act({ decision: d, action: 'update_post', resource: 'wp:post:4096', fields: ['meta_description'], payload: { meta_description: 'Live' }, expected_version: 0 }));
    await expect.poll(() => page.locator('#receipt-list tbody tr').count(), { timeout: 10_000 }).toBe(3);
    expect(await page.locator('#receipt-list tbody tr').first().getAttribute('class')).toBe('fresh');
    expect(await page.locator('#receipt-list tbody tr').first().textContent()).toContain(live.receipt_id.slice(0, 13));
    expect(await page.locator('#live-status').textContent()).toContain('1 new receipt');
    // Times are the viewer's, with UTC on hover.
    const title = await page.locator('#receipt-list time').first().getAttribute('title');
    expect(title).toMatch(/UTC$/);
    await shoot('receipts');
    await page.locator('#receipt-list tbody tr').first().locator('a[href^="#/receipt/"]').click();
    await poll(() => page.locator('#chain-edges').textContent()).toContain('d-orch-seo');
    const edges = await page.locator('#chain-edges tbody tr td:first-child').allTextContents();
    expect(edges).toEqual(['g-orchestrator', 'd-orch-seo']);
    expect(await page.locator('#chain-graph canvas').count()).toBeGreaterThan(0);
    await poll(() => page.locator('#chain-verdict').textContent()).toContain('Verified');
    // Its place in its key's chain, as the verify answer and the receipt give it.
    expect(await page.locator('#chain-verdict').textContent()).toMatch(/chains, \d+ entries sound, heads root [0-9a-f]{16}…; this receipt is entries \d+, \d+ of the chain of wp:post:4096; the graph's event log, \d+ events, sound\.$/);
    expect(await page.locator('#versions').textContent()).toBe('0 → 1');
    // The deep link opens the same view in a fresh tab.
    const url = page.url();
    expect(url).toMatch(/#\/receipt\/rcpt_[0-9a-f-]+$/);
    const tab = await context.newPage();
    await tab.goto(url);
    await poll(() => tab.locator('#chain-edges').textContent()).toContain('g-orchestrator');
    await tab.close();
    // One click exports the chain for an incident report.
    const [svg] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export SVG' }).click()]);
    expect(svg.suggestedFilename()).toMatch(/^receipt-rcpt_.*-chain\.svg$/);
    const svgText = readFileSync((await svg.path())!, 'utf8');
    expect(svgText).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    for (const label of ['governance', 'orchestrator', 'seo-agent-7', 'g-orchestrator (grant)', 'd-orch-seo (delegate)']) expect(svgText).toContain(label);
    const [png] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export PNG' }).click()]);
    expect(readFileSync((await png.path())!).subarray(1, 4).toString()).toBe('PNG');
    await shoot('receipt');
    await shoot('receipt-chain', page, '#chain-graph');
  });

  it('moves the time slider across a revocation: the capability appears, then disappears', async () => {
    await page.goto(`${server.url}/console/#/principal/seo-agent-7`);
    const slider = page.locator('#time-slider');
    await slider.waitFor();
    const row = () => page.locator('#caps-at-table tbody tr', { hasText: 'd-orch-seo-staging' });
    const validRow = async () => (await row().count()) > 0 && (await row().locator('.badge').textContent()) === 'valid';
    // Keyboard only: focus the slider, End = the latest event (the revocation).
    await slider.focus();
    await page.keyboard.press('End');
    await poll(() => page.locator('#slider-label').textContent()).toContain(`Revision ${head}`);
    await poll(() => page.locator('#caps-at').textContent()).toContain(`revision ${head}`);
    expect(await validRow()).toBe(false);
    await page.keyboard.press('ArrowLeft');
    await poll(() => page.locator('#caps-at').textContent()).toContain(`revision ${head - 1}`);
    await poll(validRow).toBe(true);
    await shoot('principal-at-delegation');
    await page.keyboard.press('ArrowLeft');
    await poll(() => page.locator('#caps-at').textContent()).toContain(`revision ${beforeTemp}`);
    expect(await row().count()).toBe(0);
    // Now (not at a past time) it is gone as well.
    await page.locator('#caps-now-table').waitFor();
    const nowBadges = await page.locator('#caps-now-table tbody tr', { hasText: 'd-orch-seo-staging' }).locator('.badge').allTextContents();
    expect(nowBadges).not.toContain('valid');
    // The slider's position is a deep link.
    expect(decodeURIComponent(page.url())).toMatch(/#\/principal\/seo-agent-7\?at=\d{4}-/);
  });

  it('opens the graph diff between two revisions: the delegation added and revoked', async () => {
    await page.goto(`${server.url}/console/#/graph?from=${beforeTemp}&to=${head}`);
    await poll(() => page.locator('#diff-table').textContent()).toContain('d-orch-seo-staging');
    const changes = await page.locator('#diff-table tbody tr').allTextContents();
    expect(changes.some((t) => t.startsWith('added') && t.includes('d-orch-seo-staging'))).toBe(true);
    expect(changes.some((t) => t.startsWith('revoked') && t.includes('d-orch-seo-staging'))).toBe(true);
    expect(await page.locator('#authority-graph canvas').count()).toBeGreaterThan(0);
    await shoot('graph-diff', page, '#authority-graph');
    await page.goto(`${server.url}/console/#/graph`);
    await poll(() => page.locator('#graph-info').textContent()).toContain(`Graph revision ${head}`);
    await shoot('graph');
  });

  it('runs impact analysis on d-orch-seo and lists seo-agent-7\'s capabilities', async () => {
    await page.goto(`${server.url}/console/#/edge/d-orch-seo`);
    await page.locator('#impact-button').click();
    await expect.poll(() => page.locator('#impact-lost').textContent(), { timeout: 15_000 }).toContain('seo-agent-7');
    const lost = await page.locator('#impact-lost tbody tr').allTextContents();
    expect(lost.some((t) => t.includes('seo-agent-7') && t.includes('update_post') && t.includes('wp:post:*') && t.includes('production'))).toBe(true);
    // Computed only: the edge is still live.
    const edge = await page.evaluate(async () => ((await (await fetch('/v1/edges/d-orch-seo')).json()) as { edge: { revoked_at: string | null } }).edge.revoked_at);
    expect(edge).toBeNull();
    await shoot('impact');
  });

  it('follows a refused write by its decision: the receipts that presented it, filtered by keyboard, and the lease it presented', async () => {
    // seo-agent-7 takes the title of post 8192 for half a second and stalls past it; editor-alice takes it next
    // (a higher epoch); seo-agent-7 wakes up and writes with the lease it had: refused, and on the record.
    const title = { action: 'update_post', resource: 'wp:post:8192', environment: 'production', fields: ['title'] };
    const key = 'wp:post:8192#title';
    const seo = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const alice = new WritClient({ baseUrl: server.url, principal: 'editor-alice', privateJwk: fixtureKey('editor-alice') });
    const decision = await seo.decide(title);
    const lapsed = await seo.acquireLease([decision], { ttlMs: 500 });
    await new Promise((r) => setTimeout(r, 700));
    const alicesDecision = await alice.decide(title);
    const alicesLease = await alice.acquireLease([alicesDecision], { ttlMs: 20_000 });
    expect(alicesLease.epochs[key]).toBe(lapsed.epochs[key]! + 1);
    const refusal = await seo.act({ decision, lease: lapsed, payload: { title: 'Stale title' }, expected_version: 0 }).then(
      () => expect.fail('a write with a lapsed lease was accepted'),
      (e: unknown) => e as WritApiError,
    );
    expect(refusal).toBeInstanceOf(WritApiError);
    const refusedId = String(refusal.problem.receipt_id);
    // editor-alice writes and lets go; seo-agent-7 takes the title again and writes with the same decision.
    const alices = await alice.act({ decision: alicesDecision, lease: alicesLease, payload: { title: "Alice's title" }, expected_version: 0 });
    await alice.releaseLease(alicesLease);
    const completed = await seo.withLease([decision], ({ act }) => act({ decision, payload: { title: 'Fresh title' }, expected_version: 1 }));
    expect(completed.status).toBe('COMPLETED');

    // The auditor has the decision id (a DECISION_REPLAYED, a decision log line): typed into the filters, Enter.
    await page.goto(`${server.url}/console/#/receipts`);
    const field = page.getByLabel('Decision id');
    await field.focus();
    await page.keyboard.type(decision.decision_id);
    await page.keyboard.press('Enter');
    await poll(() => page.url()).toContain(`#/receipts?decision_id=${decision.decision_id}`);
    await poll(() => page.locator('#receipt-list tbody tr').count()).toBe(2);
    const rows = await page.locator('#receipt-list tbody tr').allTextContents();
    // Newest first: the write the decision authorized, then the refusal with its code; nothing of editor-alice's.
    expect(rows[0]).toContain(completed.receipt_id.slice(0, 13));
    expect(rows[0]).toContain('COMPLETED');
    expect(rows[1]).toContain(refusedId.slice(0, 13));
    expect(rows[1]).toContain(`REJECTED ${refusal.code}`);
    expect(rows.join()).not.toContain(alices.receipt_id.slice(0, 13));
    expect(await page.locator('#decision-filter').textContent()).toContain(decision.decision_id);
    expect(await field.inputValue()).toBe(decision.decision_id);
    await shoot('receipts-by-decision');

    // The refusal's receipt: the lease presented against the key's epoch, holder and lease at the refusal.
    await page.locator('#receipt-list tbody tr', { hasText: 'REJECTED' }).locator('a[href^="#/receipt/"]').click();
    await poll(() => page.locator('#presented-keys').textContent()).toContain(key);
    expect(await page.locator('#presented-lease-id').textContent()).toBe(lapsed.lease_id);
    const epoch = lapsed.epochs[key]!;
    expect(await page.locator('#presented-keys tbody tr', { hasText: key }).locator('td').allTextContents())
      .toEqual([key, `${epoch} (stale: the key is at ${epoch + 1})`, String(epoch + 1), 'editor-alice', `${alicesLease.lease_id} (not the one presented)`, 'HELD']);
    expect(await page.locator('section', { has: page.locator('#s-lease-presented') }).textContent()).toContain(`Refused with ${refusal.code}`);
    // Nothing of a token reaches the page.
    for (const token of [lapsed.token, alicesLease.token]) expect(await page.content()).not.toContain(token);
    await shoot('receipt-lease-presented', page, '#presented-keys');

    // From the receipt, by keyboard, to every receipt that presented its decision; the one that wrote shows no lease refusal.
    await page.locator('#decision-receipts').focus();
    await page.keyboard.press('Enter');
    await poll(() => page.url()).toContain(`#/receipts?decision_id=${decision.decision_id}`);
    await poll(() => page.locator('#receipt-list tbody tr').count()).toBe(2);
    await page.locator('#receipt-list tbody tr', { hasText: 'COMPLETED' }).locator('a[href^="#/receipt/"]').click();
    await poll(() => page.locator('#versions').textContent()).toBe('1 → 2');
    expect(await page.locator('#presented-keys').count()).toBe(0);
  });

  it('a refusal for a replayed decision links the receipt of the write that used it', async () => {
    const seo = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const decision = await seo.decide({ action: 'update_post', resource: 'wp:post:4096', environment: 'production', fields: ['title'] });
    const { written, replayed } = await seo.withLease([decision], async ({ act }) => {
      const written = await act({ decision, payload: { title: 'Once' }, expected_version: 0 });
      const replayed = await act({ decision, payload: { title: 'Twice' }, expected_version: 1 }).then(
        () => expect.fail('a decision was used for a second write'),
        (e: unknown) => e as WritApiError,
      );
      return { written, replayed };
    });
    expect(replayed).toBeInstanceOf(WritApiError);
    expect(replayed.problem).toMatchObject({ code: 'DECISION_REPLAYED', used_by_receipt_id: written.receipt_id });

    await page.goto(`${server.url}/console/#/receipt/${encodeURIComponent(String(replayed.problem.receipt_id))}`);
    const used = page.locator('#used-by-receipt');
    await poll(() => used.textContent()).toBe(written.receipt_id);
    // From the refusal's used_by_receipt_id, a field of its receipt, not read out of the message.
    expect(await used.getAttribute('data-from')).toBe('field');
    expect(await page.locator('dd', { has: used }).textContent()).toBe(`DECISION_REPLAYED: ${String(replayed.problem.detail)}`);
    await shoot('receipt-decision-replayed', page, '#used-by-receipt');

    // A refusal recorded before Writ kept the field (the API answers its error without it): linked from its message.
    const whyUrl = `**/v1/receipts/${encodeURIComponent(String(replayed.problem.receipt_id))}/why`;
    await page.route(whyUrl, async (route) => {
      const response = await route.fetch();
      const json = (await response.json()) as { receipt: { error: Record<string, unknown> } };
      delete json.receipt.error.used_by_receipt_id;
      await route.fulfill({ response, json });
    });
    await page.goto(`${server.url}/console/#/receipts`);
    await page.goto(`${server.url}/console/#/receipt/${encodeURIComponent(String(replayed.problem.receipt_id))}`);
    await poll(() => used.getAttribute('data-from')).toBe('message');
    expect(await used.textContent()).toBe(written.receipt_id);
    expect(await page.locator('dd', { has: used }).textContent()).toBe(`DECISION_REPLAYED: ${String(replayed.problem.detail)}`);
    await page.unroute(whyUrl);
    await page.goto(`${server.url}/console/#/receipts`);
    await page.goto(`${server.url}/console/#/receipt/${encodeURIComponent(String(replayed.problem.receipt_id))}`);
    await poll(() => used.getAttribute('data-from')).toBe('field');
    // By keyboard, to the write that used the decision.
    await used.focus();
    await page.keyboard.press('Enter');
    await poll(() => page.url()).toContain(`#/receipt/${written.receipt_id}`);
    await poll(() => page.locator('h1').textContent()).toBe(`Receipt ${written.receipt_id}`);
    expect(await page.locator('dl.facts .badge').first().textContent()).toBe('COMPLETED');
    expect(await page.locator('#used-by-receipt').count()).toBe(0);
  });

  it('shows coordination and is keyboard navigable, with no CSP violation anywhere', async () => {
    // seo-agent-7 holds a title lease while editor-alice waits in the queue for it.
    const seo = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const alice = new WritClient({ baseUrl: server.url, principal: 'editor-alice', privateJwk: fixtureKey('editor-alice') });
    const held = await seo.acquireLease([await seo.decide({ action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] })], { ttlMs: 20_000 });
    const waiting = alice.acquireLease([await alice.decide({ action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] })], { ttlMs: 5_000, waitMs: 15_000 });
    waiting.catch(() => undefined); // awaited below; a failure must not surface as an unhandled rejection first
    // The view asks for the held keys only, every key ever leased only once asked to show them.
    const leaseReads: string[] = [];
    const onRequest = (r: { url(): string }) => {
      const u = new URL(r.url());
      if (u.pathname === '/v1/leases') leaseReads.push(u.search);
    };
    page.on('request', onRequest);
    await page.goto(`${server.url}/console/#/coordination`);
    await poll(() => page.locator('#leases').textContent()).toContain('seo-agent-7');
    expect(leaseReads.length).toBeGreaterThan(0);
    expect(new Set(leaseReads)).toEqual(new Set(['?state=HELD']));
    const row = await page.locator('#leases tbody tr', { hasText: 'wp:post:1024#title' }).textContent();
    expect(row).toContain('HELD');
    expect(row).toContain(String(held.epochs['wp:post:1024#title']));
    // The view refreshes every 3 s; the waiter may join the queue just after a refresh.
    await expect.poll(() => page.locator('#queues').textContent(), { timeout: 10_000 }).toContain('editor-alice');
    await page.locator('#show-free').check();
    await expect.poll(() => page.locator('#leases').textContent(), { timeout: 10_000 }).toContain('wp:post:2048#title');
    expect(leaseReads).toContain('');
    // Every key ever leased comes a page at a time: with more keys than a page, the view turns pages by key.
    const many = Array.from({ length: 102 }, (_, i) => `wp:post:${5000 + i}`);
    for (let i = 0; i < many.length; i += 51) {
      const decisions = await Promise.all(many.slice(i, i + 51).map((resource) => seo.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] })));
      await seo.releaseLease(await seo.acquireLease(decisions, { ttlMs: 20_000 }));
    }
    const leaseRows = () => page.locator('#leases tbody tr').allTextContents();
    await expect.poll(async () => (await leaseRows()).length, { timeout: 10_000 }).toBe(100);
    const firstPage = await leaseRows();
    const lastShown = firstPage.at(-1)!.match(/wp:post:\d+#title/)![0];
    await page.locator('#leases-next').click();
    await expect.poll(async () => (await leaseRows())[0], { timeout: 10_000 }).not.toBe(firstPage[0]);
    const secondPage = await leaseRows();
    expect(secondPage.join('\n')).toContain('wp:post:5101#title');
    expect(secondPage.join('\n')).not.toContain(lastShown);
    expect(leaseReads).toContain(`?after=${encodeURIComponent(lastShown)}`);
    await shoot('coordination-next-keys', page, '#leases-pages');
    await page.locator('#leases-first').click();
    await expect.poll(async () => (await leaseRows())[0], { timeout: 10_000 }).toBe(firstPage[0]);
    page.off('request', onRequest);
    await shoot('coordination');
    await seo.releaseLease(held);
    const next = await waiting;
    expect(next.holder).toBe('editor-alice');
    await expect.poll(() => page.locator('#queues').textContent(), { timeout: 10_000 }).toContain('Nobody is waiting');
    await alice.releaseLease(next);
    // Tab from the top: the skip link first, then the header's links, each with a visible focus ring.
    const order: string[] = [];
    // Start at the first focusable element, by keyboard (so the browser shows focus as it would to a keyboard user).
    await page.focus('a.skip');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Shift+Tab');
    for (let i = 0; i < 8; i++) {
      const f = await page.evaluate(() => {
        const el = document.activeElement;
        return { name: el.id || el.getAttribute('aria-label') || el.textContent?.trim() || el.tagName, outline: getComputedStyle(el).outlineStyle };
      });
      expect(f.outline, `${f.name} shows where the focus is`).not.toBe('none');
      order.push(f.name);
      await page.keyboard.press('Tab');
    }
    expect(order).toEqual(['Skip to content', 'W Writ console', 'Receipts', 'Graph', 'Coordination', 'jump-principal', 'Open', 'sign-out']);
    // The skip link moves the focus to the view and leaves the deep link alone.
    await page.focus('a.skip');
    await page.keyboard.press('Enter');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('main');
    expect(page.url()).toMatch(/#\/coordination$/);
    // Every control is labelled.
    const unlabelled = await page.evaluate(() => [...document.querySelectorAll('input, select')].filter((el: any) => !el.labels?.length && !el.getAttribute('aria-label')).map((el: any) => el.outerHTML));
    expect(unlabelled).toEqual([]);
    expect(cspViolations).toEqual([]);
  });

  it('the header says when a rebuilt policy bundle was refused, and clears when the live one is named again', { timeout: 90_000 }, async () => {
    const live = ((await (await fetch(`${server.url}/readyz`)).json()) as { policy_revision: string }).policy_revision;
    const policies = join(bundleDir, '..', `${bundleDir.split('/').pop()}-policies`);
    cpSync(join(REPO, 'policies'), policies, { recursive: true, filter: (src) => !src.endsWith('_test.rego') });
    writeFileSync(join(policies, TWO_VALUES_FILE), TWO_VALUES_RULE);
    try {
      // The service answers a title edit in production: the rebuilt bundle fails on such inputs.
      const seo = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
      expect((await seo.decide({ action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] })).allow).toBe(true);
      const conflicting = await buildPolicyBundle({ opaPath: findOpa(REPO), policiesDir: policies, outDir: bundleDir });
      await poll(async () => ((await (await fetch(`${server.url}/readyz`)).json()) as { policy_refused?: { revision: string } }).policy_refused?.revision).toBe(conflicting.revision);
      // (Each view looks it up, on a change of view: pass through coordination so that receipts is one.)
      await page.goto(`${server.url}/console/#/coordination`);
      await page.goto(`${server.url}/console/#/receipts`);
      await poll(() => page.locator('.policy-refused').textContent()).toContain(`rebuilt ${conflicting.revision.slice('sha256:'.length, 'sha256:'.length + 8)} refused `);
      expect(await page.locator('.policy-refused').textContent()).toContain('var assignment conflict');
      expect(await page.locator('.who .policy').textContent()).toContain(`policy ${live.slice('sha256:'.length, 'sha256:'.length + 8)}`);
      await shoot('policy-refused');
      // The author reverts: the folder names the live bundle again.
      writeFileSync(join(bundleDir, 'revision.tmp'), `${live}\n`);
      renameSync(join(bundleDir, 'revision.tmp'), join(bundleDir, 'revision'));
      await poll(async () => ((await (await fetch(`${server.url}/readyz`)).json()) as { policy_refused?: unknown }).policy_refused === undefined).toBe(true);
      await page.goto(`${server.url}/console/#/coordination`);
      await poll(() => page.locator('.who .policy').textContent()).toBe(`policy ${live.slice('sha256:'.length, 'sha256:'.length + 8)}`);
      expect(await page.locator('.policy-refused').count()).toBe(0);
    } finally {
      rmSync(policies, { recursive: true, force: true });
    }
  });

  it('a receipt whose chain was revoked since says by whom and why, for the edge and for the principal', async () => {
    const gov = new WritClient({ baseUrl: server.url, principal: 'governance', privateJwk: readAdminCredential(server.dataDir).privateJwk as never });
    const receipt = ((await gov.request('GET', '/v1/receipts?resource=wp:post:2048')) as { receipts: { receipt_id: string }[] }).receipts[0]!.receipt_id;
    await gov.request('DELETE', '/v1/edges/d-orch-seo', { reason: 'incident 9: prompt injection' });
    await gov.request('DELETE', '/v1/principals/seo-agent-7', { reason: 'its key leaked' });
    await page.goto(`${server.url}/console/#/receipt/${receipt}`);
    await poll(() => page.locator('#chain-edges').textContent()).toContain('by governance: incident 9: prompt injection');
    const now = await page.locator('#chain-edges tbody tr td:last-child').allTextContents();
    expect(now).toEqual(['unchanged', expect.stringMatching(/^revoked .+ by governance: incident 9: prompt injection$/)]);
    expect(await page.locator('#chain-principals-revoked tbody tr').allTextContents()).toEqual([expect.stringMatching(/^seo-agent-7revoked .+ by governance: its key leaked$/)]);
    await shoot('receipt-revoked-since');
  });

  it('a receipt\'s verdict says when the graph\'s event log was rewritten, though the receipts verify', async () => {
    const gov = new WritClient({ baseUrl: server.url, principal: 'governance', privateJwk: readAdminCredential(server.dataDir).privateJwk as never });
    const receipt = ((await gov.request('GET', '/v1/receipts?resource=wp:post:2048')) as { receipts: { receipt_id: string }[] }).receipts[0]!.receipt_id;
    // Someone with write access to the file drops the trigger and rewrites why d-orch-seo was revoked.
    const db = new Database(join(server.dataDir, 'writ.sqlite'));
    try {
      db.pragma('busy_timeout = 5000');
      const revision = db.prepare("SELECT revision FROM graph_events WHERE type = 'edge.revoked' AND payload LIKE '%d-orch-seo%'").pluck().get() as number;
      db.exec('DROP TRIGGER graph_events_no_update');
      const event = JSON.parse(db.prepare('SELECT payload FROM graph_events WHERE revision = ?').pluck().get(revision) as string) as { reason?: string };
      db.prepare('UPDATE graph_events SET payload = ? WHERE revision = ?').run(JSON.stringify({ ...event, reason: 'routine rotation' }), revision);
      expect(db.prepare('SELECT payload FROM graph_events WHERE revision = ?').pluck().get(revision)).toContain('routine rotation');
      await page.goto(`${server.url}/console/#/receipt/${receipt}`);
      await page.reload(); // the same address as the test before: load the verdict again
      await poll(() => page.locator('#chain-verdict').textContent()).toContain(`the graph's event log is BROKEN at revision ${revision}`);
      expect(await page.locator('#chain-verdict').textContent()).toContain('do not rely on them');
      await shoot('receipt-graph-log-broken');
    } finally {
      db.close();
    }
  });

  it('signing out returns to the sign-in page and the cookie no longer reads', async () => {
    await page.goto(`${server.url}/console/#/receipts`);
    await page.locator('#sign-out').click();
    await poll(() => page.locator('.signin h1').textContent()).toContain('Sign in');
    const status = await page.evaluate(async () => (await fetch('/v1/receipts')).status);
    expect(status).toBe(401);
    await shoot('signed-out');
  });
});

describe('the graph view with hundreds of principals', () => {
  it('lays out 500 generated principals (dagre) and stays usable', async () => {
    // A data directory holding a generated organisation (leads → managers → agents), then `writ serve` on it.
    const dataDir = mkdtempSync(join(tmpdir(), 'writ-e2e-big-'));
    const w = await openWrit(loadConfig({ dataDir }, {}));
    const now = Date.now();
    await w.ctx.store.readWrite((tx) => tx.graph.append(generateImpactGraph(500, now).events, GOVERNANCE_ID, now));
    await w.close();
    // Without the example graph (its owners would clash with the generated ones) and without an upstream.
    const big = await onFreePort((port) => spawnListening('writ serve', [CLI, 'serve', '--data-dir', dataDir, '--port', String(port), '--no-upstream', '--console-link'], process.env));
    const bigUrl = `http://127.0.0.1:${big.port}`;
    try {
      const link = /(http:\/\/\S+\/console\/#login=\S+)/.exec(big.output())![1]!;
      const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const p = await ctx.newPage();
      watch(p);
      await p.goto(link);
      await p.locator('.session').waitFor();
      const started = Date.now();
      await p.goto(`${bigUrl}/console/#/graph`);
      await expect.poll(() => p.locator('#graph-info').textContent(), { timeout: 30_000 }).toMatch(/\d{3} principals/);
      await p.locator('#authority-graph canvas').first().waitFor();
      const ms = Date.now() - started;
      const principals = Number(/(\d+) principals/.exec((await p.locator('#graph-info').textContent())!)![1]);
      expect(principals).toBeGreaterThanOrEqual(500);
      console.log(`[console] graph view: ${principals} principals fetched, laid out and drawn in ${ms} ms`);
      expect(ms).toBeLessThan(30_000); // measured 2.4–4.4 s on this (shared, loaded) machine; a hang or a quadratic layout would blow it
      await shoot('graph-500-principals', p, '#authority-graph');
      // Focus on one manager: it, its lead and agents stay, the rest fades (a deep link too).
      await p.goto(`${bigUrl}/console/#/graph?focus=manager-3`);
      await expect.poll(() => p.locator('#graph-edge-detail').textContent(), { timeout: 30_000 }).toContain('manager-3 and every principal above or below it');
      await p.waitForTimeout(400);
      await shoot('graph-500-focus', p, '#authority-graph');
      await ctx.close();
    } finally {
      big.proc.kill('SIGTERM');
      await big.exited;
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 90_000);
});
