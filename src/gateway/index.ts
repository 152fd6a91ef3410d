/** The enforcement point: coordination keys, the authority watermark, upstream routing, the write path. */
export { performAction, type ActionInput, type ActionCredentials, type ActionOutcome, type ActionTimings } from './perform-action.js';
export { coordinationKeys, parseFencingHeader } from './coordination-keys.js';
export { checkAuthorityStillValid } from './authority-watermark.js';
export { UpstreamRouter, type UpstreamRoute, type UpstreamRouteConfig } from './upstream-router.js';
