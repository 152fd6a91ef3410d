# Entrypoint writ/authz/decision: DecisionInput → DecisionResult (src/policy/types.ts).
# Only the result's fields live in this package; the logic is in writ.authz.lib.decide.
package writ.authz.decision

import data.writ.authz.lib.decide

allow := decide.allow

reasons := decide.reasons

approval_missing := decide.approval_missing

obligations := decide.obligations

chain_index := decide.chain_index

risk := decide.risk

chains := decide.verdicts
