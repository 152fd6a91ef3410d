import { join } from 'node:path';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { epochsOf, release, take } from '../store/conformance/helpers.js';

/** Takes and releases `key` `times` times on the data directory's store (what a decide + acquire + release does to it); the epochs issued. */
export async function takeEpochs(dataDir: string, key: string, times: number): Promise<number[]> {
  const store = await openSqliteStore(join(dataDir, 'writ.sqlite'));
  try {
    const epochs: number[] = [];
    for (let i = 0; i < times; i++) {
      const t = await take(store, [key], 'seo-agent-7');
      epochs.push(epochsOf(t)[key]!);
      await release(store, t);
    }
    return epochs;
  } finally {
    await store.close();
  }
}
