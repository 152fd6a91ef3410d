import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exchangeLoginToken } from '../../src/service/index.js';
import { startHarness, type Harness } from '../support/harness.js';
import { requireDist, startServerProcess } from '../support/server-process.js';
import { runWrit } from '../support/cli.js';
import { ManualClock } from '../../src/clock.js';

let h: Harness;
const writ = (...args: string[]) => runWrit(h.dataDir, ...args);

beforeAll(async () => {
  requireDist();
  h = await startHarness({ clock: new ManualClock(Date.now()) });
}, 60_000);
afterAll(async () => h?.close());

describe('writ console', () => {
  it('prints a one-time login link (another process, the same store): it signs in once', async () => {
    const { stdout, code } = await writ('console', '--url', 'https://writ.example.com/');
    expect(code).toBe(0);
    expect(stdout).toContain('console login link for governance (works once, until ');
    const url = /(https:\/\/writ\.example\.com\/console\/#login=\S+)/.exec(stdout)![1]!;
    const token = url.split('#login=')[1]!;
    expect((await exchangeLoginToken(h.ctx, token)).principal).toBe('governance');
    await expect(exchangeLoginToken(h.ctx, token)).rejects.toMatchObject({ code: 'LOGIN_LINK_SPENT' });
  });

  it('says when the principal holds no audit grant, and refuses an unknown principal', async () => {
    const json = await writ('console', '--principal', 'seo-agent-7', '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({ principal: 'seo-agent-7', auditor: false, url: expect.stringContaining('/console/#login=') });
    const text = await writ('console', '--principal', 'seo-agent-7');
    expect(text.stdout).toContain('no audit grant: shows only its own receipts and capabilities');
    const unknown = await writ('console', '--principal', 'nobody');
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toContain('UNKNOWN_PRINCIPAL');
  });
});

describe('writ serve and the login link', () => {
  it('prints no login link unless asked (--console-link), since a server log is read by others; it says where the console is', async () => {
    const server = await startServerProcess();
    try {
      expect(server.log()).not.toContain('login=');
      expect(server.log()).toContain('/console/ (`writ console` prints a one-time login link)');
    } finally {
      await server.stop();
    }
  }, 60_000);
});
