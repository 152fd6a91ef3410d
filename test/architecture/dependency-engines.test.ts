import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

/**
 * Writ runs on Node.js 20 (the machines' runtime): no package in the lock file may ask for a later
 * major. A package that does (e.g. cookie 2, which light-my-request 6.8 pulled in through fastify)
 * makes every `npm install` warn EBADENGINE and may use an API Node 20 lacks; package.json's
 * `overrides` then pins the dependent to a release that does not need it.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const SUPPORTED_MAJOR = '20.x';

interface LockEntry {
  version?: string;
  engines?: { node?: string } | string[];
}

function lockedEngines(): { name: string; version: string; node: string }[] {
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  return Object.entries(lock.packages).flatMap(([path, entry]) => {
    const node = !entry.engines || Array.isArray(entry.engines) ? undefined : entry.engines.node;
    return path === '' || node === undefined ? [] : [{ name: path.replace(/^.*node_modules\//, ''), version: entry.version ?? '?', node }];
  });
}

describe('dependencies run on Node.js 20', () => {
  const engines = lockedEngines();

  it('every locked package accepts some Node.js 20 release', () => {
    expect(engines.length).toBeGreaterThan(0);
    const refusing = engines.filter((p) => !semver.intersects(p.node, SUPPORTED_MAJOR, { loose: true }));
    expect(refusing.map((p) => `${p.name}@${p.version} needs node ${p.node}`)).toEqual([]);
  });

  it('every locked package accepts the Node.js running this suite', () => {
    const refusing = engines.filter((p) => !semver.satisfies(process.versions.node, p.node, { loose: true }));
    expect(refusing.map((p) => `${p.name}@${p.version} needs node ${p.node}, this is ${process.versions.node}`)).toEqual([]);
  });
});
