import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import type { DecisionClaims } from '../../src/decision/index.js';

export const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
export const AUDIENCE = 'writ-gateway';

export function claims(overrides: Partial<DecisionClaims> = {}): DecisionClaims {
  return {
    decision_id: 'dec-1',
    principal: 'seo-agent-7',
    audience: AUDIENCE,
    action: 'update_post',
    resource: 'wp:post:1024',
    environment: 'production',
    fields: ['title', 'meta_description'],
    chain: ['e-grant-1', 'e-del-2'],
    owners: { title: 'seo-control-plane', meta_description: 'seo-control-plane' },
    graph_revision: 42,
    policy_revision: 'sha256:abc',
    obligations: {
      lease_required: true,
      version_required: true,
      approval_required: false,
      resource_class: 'WRITE_EXCLUSIVE',
      field_classes: { title: 'exclusive' },
      conflict_domain: 'SEO_METADATA',
    },
    risk: 2,
    issued_at: T0,
    expires_at: T0 + 30_000,
    ...overrides,
  };
}

/** A fresh temp directory, removed after the test. */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'writ-decision-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
