# Entrypoint writ/authz/delegation: DelegationInput → DelegationResult (src/policy/types.ts).
package writ.authz.delegation

import data.writ.authz.lib.delegate

allow := delegate.allow

violations := delegate.violations

chain_index := delegate.chain_index
