/**
 * Upstreams: the HTTP client the gateway forwards writes with, and the SAMPLE UPSTREAM (a stand-in
 * for a real CMS, shipped for the demo and the tests). Importing `client.js` alone avoids loading fastify.
 */
export {
  HttpUpstreamClient,
  type HttpUpstreamClientOptions,
  type UpstreamClient,
  type UpstreamRead,
  type UpstreamWrite,
  type UpstreamWriteResult,
} from './client.js';
export { formatFencingEpochs, highestEpoch, parseFencingEpochs, WHOLE_POST_KEY, type FencingEpochs } from '../wire/fencing-header.js';
export { postIdOf, samplePostAdapter, type ResourceKeyAdapter } from './resource-key.js';
export { createSampleUpstream, startSampleUpstream, type SampleUpstreamOptions } from './app.js';
export { POST_FIELDS, SampleContentStore, type Post, type PostFields, type PostRevision, type RequestRecord, type WriteOutcome } from './content-store.js';
export { openUpstreamDatabase } from './database.js';
