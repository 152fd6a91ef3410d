/** The SDK's assertions: made in src/wire (shared with `writ approve`), with the key pair generator. */
export { assertionAlgorithm, createApprovalAssertion, createCallerAssertion, type ApprovalRequest, type CallerAssertionOptions } from '../wire/assertions.js';
export { generatePrincipalKeyPair, type PrincipalKeyPair } from '../wire/principal-keys.js';
