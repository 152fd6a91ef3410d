/** The enforcement point's steps: coordination keys, the authority watermark, upstream routing (the write use case is service/actions.ts). */
export { coordinationKeys, parseFencingHeader } from './coordination-keys.js';
export { checkAuthorityStillValid, checkNotRevokedSince, checkOwnersUnchangedSince, principalsOfChain } from './authority-watermark.js';
export { UpstreamRouter, type UpstreamRoute, type UpstreamRouteConfig } from './upstream-router.js';
