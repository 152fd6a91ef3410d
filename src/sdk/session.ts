import type { KeyObject, JsonWebKey } from 'node:crypto';
import type { JWK } from 'jose';
import { createCallerAssertion } from './assertion.js';
import { createSessionRequestToken, sessionKeyExchange, sessionOpeningClaims } from '../wire/caller-session.js';
import { backoffCeiling } from './backoff.js';
import { WritApiError } from './errors.js';
import { refusalError } from './refusal.js';

/**
 * The SDK's caller session (WritClientOptions.sessions): opened lazily with one assertion (one open for
 * many concurrent calls), renewed in the background when a fifth of its life is left (never two opens at
 * once), and re-opened when Writ no longer knows it. A Writ without sessions (404, or sessions disabled)
 * is asked again after a back-off (5 minutes, doubling to an hour, reset when a session opens): meanwhile
 * the client signs assertions, and while that one probe is pending requests go on with assertions too.
 */
export interface Session {
  /** The opaque session token (`ws1.…`): each request token's `kid`. */
  readonly token: string;
  /** K, made once per session. */
  readonly key: KeyObject;
  readonly openedAt: number;
  /** By this machine's clock: the sooner of Writ's `expires_at` and the send time plus the ttl asked for. */
  readonly expiresAt: number;
}

/** A request sent with a session this close to its end (or a tenth of its life, if less) waits for the next one instead. */
const EXPIRY_MARGIN_MS = 2_000;
/** How long an open may go unanswered (a paused Writ): the callers waiting for it then get the error, the next call asks again. */
const OPEN_TIMEOUT_MS = 10_000;
/** After Writ said it has no sessions: ask again in 5 min, then 10, 20, 40, and every hour. */
const PROBE_BACKOFF = { baseMs: 5 * 60_000, capMs: 60 * 60_000 };

export interface CallerSessionsOptions {
  base: string;
  principal: string;
  privateJwk: JWK;
  audience: string;
  ttlMs?: number;
  fetch: typeof fetch;
}

export class CallerSessions {
  private session: Session | null = null;
  private opening: Promise<Session | null> | null = null;
  /**
   * Writ has no sessions (404 on POST /v1/sessions) or has them off: assertions until this time (by
   * Date.now()), then one probe (an open in the background). Null: sessions, as far as known.
   */
  private probeAt: number | null = null;
  /** Probes (and the first refusal) answered "no sessions" in a row: the back-off's attempt. */
  private refusals = 0;

  constructor(private readonly options: CallerSessionsOptions) {
    const { ttlMs } = options;
    if (ttlMs !== undefined && !(Number.isInteger(ttlMs) && ttlMs >= 1_000)) throw new TypeError(`sessions.ttlMs must be a whole number of ms, at least 1000 (Writ's minimum), got ${String(ttlMs)}`);
  }

  /** The session to sign this request with, or null: sign an assertion. Opens or renews as needed. */
  async current(): Promise<Session | null> {
    const now = Date.now();
    if (this.probeAt !== null) {
      // One probe at a time, never awaited: this request goes with an assertion either way.
      if (now >= this.probeAt && this.opening === null) void this.open().catch(() => this.noSessions());
      return null;
    }
    const session = this.session;
    if (session !== null && session.expiresAt - now > Math.min(EXPIRY_MARGIN_MS, (session.expiresAt - session.openedAt) / 10)) {
      // A fifth of its life left: the next one is opened in the background while this one still serves.
      if (session.expiresAt - now < (session.expiresAt - session.openedAt) / 5) void this.open().catch(() => undefined);
      return session;
    }
    return this.open();
  }

  /** `Authorization`'s value for one request. */
  async authorization(method: string, path: string, session: Session | null): Promise<string> {
    const { principal, privateJwk, audience } = this.options;
    if (session === null) return `Bearer ${await createCallerAssertion({ principal, privateJwk, audience })}`;
    // `htu` is the path as fetch sends it: the URL parser's (percent-encoding what the caller left raw).
    return `Bearer ${createSessionRequestToken({ session: session.token, key: session.key, principal, audience, method, path: new URL(this.options.base + path).pathname })}`;
  }

  /**
   * After `session` signed a request Writ refused with `error`: true when the request had no effect and
   * should be sent once more (with a new session: the old one is unknown to Writ, expired, or its key
   * rotated; or with an assertion: sessions were turned off).
   */
  refused(session: Session, error: unknown): boolean {
    if (!(error instanceof WritApiError)) return false;
    const code = error.code;
    if (code === 'CALLER_SESSION_INVALID') {
      if (this.session === session) this.session = null;
      return true;
    }
    if (code === 'CALLER_SESSIONS_DISABLED') {
      // Once per turn-off: the other requests of the same session refused alike do not lengthen the back-off.
      if (this.probeAt === null) this.noSessions();
      return true;
    }
    return false;
  }

  /** Writ said it has no sessions (or a probe failed): assertions, and the next probe after the back-off. */
  private noSessions(): void {
    this.session = null;
    this.probeAt = Date.now() + backoffCeiling(this.refusals, PROBE_BACKOFF);
    this.refusals++;
  }

  /** One open at a time: every caller waiting meanwhile gets its session. */
  private open(): Promise<Session | null> {
    this.opening ??= this.openOnce().finally(() => {
      this.opening = null;
    });
    return this.opening;
  }

  private async openOnce(): Promise<Session | null> {
    const { base, principal, privateJwk, audience, ttlMs } = this.options;
    const exchange = sessionKeyExchange();
    // Bound to this session's key and request (cnf.jwk, htm, htu): Writ opens no session with an unbound assertion.
    const claims = sessionOpeningClaims(exchange.x, new URL(`${base}/v1/sessions`).pathname);
    const assertion = await createCallerAssertion({ principal, privateJwk, audience, claims });
    const sentAt = Date.now();
    const res = await this.options.fetch(`${base}/v1/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${assertion}`, 'content-type': 'application/json' },
      body: JSON.stringify({ public_key: { kty: 'OKP', crv: 'X25519', x: exchange.x }, ...(ttlMs !== undefined ? { ttl_ms: ttlMs } : {}) }),
      signal: AbortSignal.timeout(OPEN_TIMEOUT_MS),
    });
    const text = await res.text();
    if (!res.ok) {
      const error = refusalError(res.status, text, res.headers.get('retry-after'));
      // A Writ from before sessions (no such route) or with them off: assertions, asked again after the back-off.
      if (res.status === 404 || error.code === 'CALLER_SESSIONS_DISABLED') {
        this.noSessions();
        return null;
      }
      throw error;
    }
    let answer: { session?: unknown; public_key?: JsonWebKey; expires_at?: unknown };
    try {
      answer = JSON.parse(text) as typeof answer;
    } catch {
      throw new WritApiError('INTERNAL', res.status, `POST /v1/sessions answered ${res.status} with a body that is not JSON`);
    }
    const expiresAt = typeof answer.expires_at === 'string' ? Date.parse(answer.expires_at) : NaN;
    if (typeof answer.session !== 'string' || typeof answer.public_key?.x !== 'string' || Number.isNaN(expiresAt)) {
      throw new WritApiError('INTERNAL', res.status, 'POST /v1/sessions answered without session, public_key.x or expires_at');
    }
    const session: Session = {
      token: answer.session,
      key: exchange.agree(answer.public_key.x),
      openedAt: sentAt,
      expiresAt: Math.min(expiresAt, ttlMs !== undefined ? sentAt + ttlMs : Infinity),
    };
    this.session = session;
    this.probeAt = null;
    this.refusals = 0;
    return session;
  }
}
