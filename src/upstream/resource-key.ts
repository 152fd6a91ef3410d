import { WritError } from '../errors.js';

/**
 * Maps a Writ coordination key to the path of that resource on an upstream. Each kind of upstream
 * gets its own adapter; the gateway's route table picks the upstream (base URL) and its adapter.
 */
export interface ResourceKeyAdapter {
  /** Path of the resource on the upstream, e.g. `/posts/1024`. Throws UNKNOWN_RESOURCE for keys it does not map. */
  pathOf(resourceKey: string): string;
}

/** The sample upstream's adapter: `wp:post:<id>` → `/posts/<id>`. */
export const samplePostAdapter: ResourceKeyAdapter = {
  pathOf(resourceKey) {
    return `/posts/${encodeURIComponent(postIdOf(resourceKey))}`;
  },
};

export function postIdOf(resourceKey: string): string {
  const m = /^wp:post:([A-Za-z0-9._~-]{1,200})$/.exec(resourceKey);
  // '.' and '..' are dot segments: the URL parser resolves /posts/.. to / before the request is sent.
  if (!m || m[1] === '.' || m[1] === '..') throw new WritError('UNKNOWN_RESOURCE', `the sample upstream maps only wp:post:<id> keys, not '${resourceKey}'`);
  return m[1]!;
}
