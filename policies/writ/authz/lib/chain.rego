# Judges one candidate chain governance → … → holder at `now`: structure, liveness of every edge
# and principal, and narrowing at every step. Decisions and delegations both use it.
package writ.authz.lib.chain

import data.writ.authz.lib.instant
import data.writ.authz.lib.scope

governance := "governance"

label(e) := concat("", ["edge ", e.id, " (", e.from, " → ", e.to, ")"])

# {ok, edges: [{id, ok, problems}], problems}; `problems` are those of the chain as a whole.
verdict(edges, holder, now, principals) := {"ok": ok, "edges": verdicts, "problems": problems} if {
	verdicts := [v |
		some i, e in edges
		ps := edge_problems(edges, i, now, principals)
		v := {"id": e.id, "ok": count(ps) == 0, "problems": sort(ps)}
	]
	problems := sort(chain_problems(edges, holder))
	bad_edges := [v | some v in verdicts; not v.ok]
	ok := (count(bad_edges) + count(problems)) == 0
}

chain_problems(edges, holder) := {"the chain is empty"} if {
	count(edges) == 0
} else := {msg} if {
	last := edges[count(edges) - 1]
	last.to != holder
	msg := concat("", ["the chain ends at ", last.to, ", not at the requester ", holder])
} else := set()

edge_problems(edges, i, now, principals) := union({
	liveness_problems(edges[i], now),
	position_problems(edges, i),
	principal_problems(edges, i, now, principals),
	narrowing_problems(edges, i),
})

# An edge is live at `now` iff it is not revoked and not_before <= now < expires_at (null bounds
# are open). A revocation counts whatever time it records: replicas share the graph, not a clock, and
# one whose clock is ahead records revocations "in the future" of another's `now` (Writ's chain
# resolution and caller authentication read any revocation as final too).
liveness_problems(e, now) := union({revoked(e, now), not_yet_valid(e, now), expired(e, now)})

live(e, now) if count(liveness_problems(e, now)) == 0

revoked(e, _) := {msg |
	e.revoked_at != null
	msg := concat("", [label(e), " was revoked at ", instant.iso(e.revoked_at)])
}

not_yet_valid(e, now) := {msg |
	e.not_before != null
	now < e.not_before
	msg := concat("", [label(e), " is not valid before ", instant.iso(e.not_before)])
}

expired(e, now) := {msg |
	e.expires_at != null
	now >= e.expires_at
	msg := concat("", [label(e), " expired at ", instant.iso(e.expires_at)])
}

position_problems(edges, 0) := union({
	{msg |
		edges[0].kind != "grant"
		msg := concat("", [label(edges[0]), " is a ", edges[0].kind, " edge; a chain starts with a grant"])
	},
	{msg |
		edges[0].from != governance
		msg := concat("", [label(edges[0]), " does not start at governance"])
	},
})

position_problems(edges, i) := union({
	{msg |
		edges[i].kind != "delegate"
		msg := concat("", [label(edges[i]), " is a ", edges[i].kind, " edge; only delegate edges may follow the grant"])
	},
	{msg |
		edges[i].from != edges[i - 1].to
		msg := concat("", [
			label(edges[i]), " does not continue the chain: it starts at ",
			edges[i].from, ", the previous edge ends at ", edges[i - 1].to,
		])
	},
}) if i > 0

# Each principal is checked on the edge that reaches it (and governance on the first edge).
principal_problems(edges, i, now, principals) := {msg |
	some id in chain_principals(edges, i)
	some msg in principal_state(id, edges[i], now, principals)
}

chain_principals(edges, 0) := {edges[0].from, edges[0].to}

chain_principals(edges, i) := {edges[i].to} if i > 0

principal_state(id, e, _, principals) := {msg} if {
	not principals[id]
	msg := concat("", ["principal ", id, " on ", label(e), " is unknown"])
} else := {msg} if {
	p := principals[id]
	p.revoked_at != null
	msg := concat("", ["principal ", id, " on ", label(e), " was revoked at ", instant.iso(p.revoked_at)])
} else := set()

narrowing_problems(_, 0) := set()

narrowing_problems(edges, i) := {msg |
	parent := edges[i - 1]
	who := {"poss": concat("", ["edge ", parent.id, "'s"]), "edge": concat("", ["edge ", parent.id])}
	some v in scope.narrowing_violations(edges[i], parent, who)
	msg := concat("", [label(edges[i]), " is wider than its parent: ", v])
} if i > 0
