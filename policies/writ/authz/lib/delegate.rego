# May `proposed` (a delegate edge from the delegator) be written? Only if the delegator holds a
# valid chain now and the proposed edge is within that chain's last edge on every dimension.
package writ.authz.lib.delegate

import data.writ.authz.lib.chain
import data.writ.authz.lib.scope
import data.writ.authz.lib.text

delegator := input.proposed.from

who := {"poss": "the delegator's", "edge": "the delegator's edge"}

verdicts := [chain.verdict(c.edges, delegator, input.now, input.principals) | some c in input.chains]

# Per valid chain: how the proposed edge exceeds its last edge.
exceeding[i] := scope.narrowing_violations(input.proposed, last, who) if {
	some i, v in verdicts
	v.ok
	edges := input.chains[i].edges
	last := edges[count(edges) - 1]
}

# The valid chain that comes closest: fewest violations, then the first listed.
closest := min({[count(v), i] | some i, v in exceeding})

allow if closest[0] == 0

default allow := false

chain_index := closest[1] if allow

else := null

violations := [] if {
	allow
} else := sort(exceeding[closest[1]]) if {
	closest
} else := array.concat(
	[concat("", ["chain: ", delegator, " holds no valid chain from governance"])],
	sort({msg |
		some i, v in verdicts
		some p in array.concat([p | some e in v.edges; some p in e.problems], v.problems)
		msg := concat("", ["chain: candidate ", text.num(i), ": ", p])
	}),
)
