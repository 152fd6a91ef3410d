import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * STYLE's layering, checked on the source instead of remembered: imports go down the layers, the
 * domain knows nothing of HTTP or of a driver, and the server does not import the agents' SDK.
 * A folder of src/ is the unit (src/store/postgres counts as store).
 */
const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

interface Imports {
  folders: Map<string, Set<string>>;
  packages: Map<string, Set<string>>;
}

function folderOf(file: string): string {
  const rel = relative(SRC, file);
  return rel.includes(sep) ? rel.split(sep)[0]! : '.';
}

function scan(): Imports {
  const folders = new Map<string, Set<string>>();
  const packages = new Map<string, Set<string>>();
  const add = (m: Map<string, Set<string>>, k: string, v: string) => (m.get(k) ?? m.set(k, new Set()).get(k)!).add(v);
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (path.endsWith('.ts')) {
        const from = folderOf(path);
        for (const m of readFileSync(path, 'utf8').matchAll(/^(?:import|export)\b[^'"]*?\bfrom\s+['"]([^'"]+)['"]/gm)) {
          const spec = m[1]!;
          if (spec.startsWith('.')) {
            const to = folderOf(resolve(dirname(path), spec));
            if (to !== from) add(folders, from, to);
          } else if (!spec.startsWith('node:')) add(packages, from, spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
        }
      }
    }
  };
  walk(SRC);
  return { folders, packages };
}

/** The folders on a cycle of the folder graph (Tarjan's strongly connected components of size > 1). */
function cycles(graph: Map<string, Set<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

const { folders, packages } = scan();
const importers = (of: Map<string, Set<string>>, target: string) => [...of].filter(([, to]) => to.has(target)).map(([from]) => from).sort();

describe('layers of src/', () => {
  it('no folder imports one that imports it back, directly or round about', () => {
    expect(cycles(folders)).toEqual([]);
  });

  it('the domain folders import neither the store, HTTP, the service nor the CLI', () => {
    const domain = ['audit', 'decision', 'gateway', 'graph', 'lease', 'policy', 'wire'];
    const above = new Set(['store', 'http', 'service', 'cli', 'demo', 'sdk']);
    const bad = domain.flatMap((d) => [...(folders.get(d) ?? [])].filter((to) => above.has(to)).map((to) => `${d} -> ${to}`));
    expect(bad).toEqual([]);
  });

  it('drivers stay in the engines: only store/ imports better-sqlite3 or pg (upstream/ is the sample CMS, with a database of its own)', () => {
    expect(importers(packages, 'pg')).toEqual(['store']);
    expect(importers(packages, 'better-sqlite3').filter((f) => f !== 'upstream')).toEqual(['store']);
  });

  it('HTTP stays at the edge: fastify is imported by http/ (and the sample upstream) only', () => {
    expect(importers(packages, 'fastify').filter((f) => f !== 'upstream')).toEqual(['http']);
  });

  it("the server does not import the agents' SDK: only its clients (the CLI's demo) do", () => {
    expect(importers(folders, 'sdk').filter((f) => f !== 'demo')).toEqual([]);
  });
});
