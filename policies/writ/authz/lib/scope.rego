# Scopes: resource pattern matching and containment, and the narrowing rules (child ⊆ parent on
# every dimension). The one place these rules live: decisions and delegations both use them.
package writ.authz.lib.scope

import data.writ.authz.lib.instant
import data.writ.authz.lib.text

# A canonical key matches a pattern segment by segment on ":": a literal, "*" (exactly one
# segment) or a final "**" (zero or more segments). Written for speed in wasm, where every decision
# matches the key against each resource class: a pattern without "*" is compared whole, and no
# arithmetic (a decimal number library in wasm) is done. test/policy/patterns-agree.test.ts checks
# these rules against src/graph/patterns.ts.
matches(key, pattern) if {
	indexof(pattern, "*") == -1
	key == pattern
}

matches(key, pattern) if {
	contains(pattern, "*")
	not unbounded(pattern)
	ks := split(key, ":")
	ps := split(pattern, ":")
	count(ks) == count(ps)
	every j, p in ps {
		segment_matches(ks[j], p)
	}
}

matches(key, "**") if is_string(key)

matches(key, pattern) if {
	endswith(pattern, ":**")
	ps := split(trim_suffix(pattern, ":**"), ":")
	ks := split(key, ":")
	count(ks) >= count(ps)
	every j, p in ps {
		segment_matches(ks[j], p)
	}
}

unbounded("**")

unbounded(pattern) if endswith(pattern, ":**")

segment_matches(_, p) if p == "*"

segment_matches(k, p) if k == p

matches_any(key, patterns) if {
	some p in patterns
	matches(key, p)
}

# Every key the child pattern matches is matched by the parent pattern.
pattern_within(child, parent) if {
	cs := split(child, ":")
	ps := split(parent, ":")
	last := count(ps) - 1
	ps[last] == "**"
	count(cs) >= last
	every j, p in array.slice(ps, 0, last) {
		segment_within(cs[j], p)
	}
}

pattern_within(child, parent) if {
	cs := split(child, ":")
	ps := split(parent, ":")
	ps[count(ps) - 1] != "**"
	count(cs) == count(ps)
	every j, p in ps {
		segment_within(cs[j], p)
	}
}

segment_within(c, p) if {
	p == "*"
	c != "**"
}

segment_within(c, p) if c == p

# Child patterns not contained in any parent pattern.
patterns_outside(child, parent) := {c |
	some c in child
	not within_any(c, parent)
}

within_any(c, parent) if {
	some p in parent
	pattern_within(c, p)
}

# Values of an actions/environments/fields list the parent does not cover ('*' covers every value;
# a child '*' is covered only by a parent '*').
values_outside(child, parent) := set() if {
	"*" in parent
} else := {c |
	some c in child
	not c in parent
}

risk_max(scope) := object.get(object.get(scope, "constraints", {}), "risk_max", 0)

# max_depth null on a grant or delegation is read as 0 (no further delegation): the safe side.
depth(d) := 0 if d == null

else := d

# The ways `child` (an edge or a proposed edge) is wider than `parent`, one line per dimension,
# each starting with the dimension name. `who.poss` names the parent's holder in the possessive
# ("the delegator's"), `who.edge` its edge ("the delegator's edge").
narrowing_violations(child, parent, who) := union({
	values_violation("actions", child.scope.actions, parent.scope.actions, who),
	values_violation("environments", child.scope.environments, parent.scope.environments, who),
	values_violation("fields", child.scope.fields, parent.scope.fields, who),
	resources_violation(child.scope.resources, parent.scope.resources, who),
	risk_violation(risk_max(child.scope), risk_max(parent.scope), who),
	not_before_violation(child.not_before, parent.not_before, who),
	expires_at_violation(child.expires_at, parent.expires_at, who),
	depth_violation(child.max_depth, parent.max_depth, who),
})

values_violation(dimension, child, parent, who) := {msg |
	outside := values_outside(child, parent)
	count(outside) > 0
	msg := concat("", [
		dimension, ": ", text.joined(outside), " ", text.is_are(outside),
		" not in ", who.poss, " ", text.list(parent),
	])
}

resources_violation(child, parent, who) := {msg |
	outside := patterns_outside(child, parent)
	count(outside) > 0
	msg := concat("", [
		"resources: ", text.joined(outside), " ", text.is_are(outside),
		" not within ", who.poss, " ", text.list(parent),
	])
}

risk_violation(child, parent, who) := {msg |
	child > parent
	msg := concat("", ["risk: ", text.num(child), " exceeds ", who.poss, " risk_max ", text.num(parent)])
}

not_before_violation(child, parent, who) := {msg} if {
	parent != null
	child == null
	msg := concat("", ["time window: not_before is unbounded but ", who.poss, " starts at ", instant.iso(parent)])
} else := {msg} if {
	parent != null
	child < parent
	msg := concat("", [
		"time window: not_before ", instant.iso(child),
		" is before ", who.poss, " ", instant.iso(parent),
	])
} else := set()

expires_at_violation(child, parent, who) := {msg} if {
	parent != null
	child == null
	msg := concat("", ["time window: expires_at is unbounded but ", who.poss, " ends at ", instant.iso(parent)])
} else := {msg} if {
	parent != null
	child > parent
	msg := concat("", [
		"time window: expires_at ", instant.iso(child),
		" is after ", who.poss, " ", instant.iso(parent),
	])
} else := set()

depth_violation(child, parent, who) := {msg} if {
	depth(parent) < 1
	msg := concat("", ["depth: ", who.edge, " allows no further delegation (max_depth ", text.num(depth(parent)), ")"])
} else := {msg} if {
	depth(child) > depth(parent) - 1
	msg := concat("", [
		"depth: max_depth ", text.num(depth(child)), " exceeds the ", text.num(depth(parent) - 1),
		" left by ", who.poss, " max_depth ", text.num(depth(parent)),
	])
} else := set()
