# The decision: a valid chain, a known action, an owner for managed state and an approval when the
# risk is above the environment's threshold. writ.authz.decision exposes the result.
package writ.authz.lib.decide

import data.writ.authz.lib.chain
import data.writ.authz.lib.resource_class
import data.writ.authz.lib.scope
import data.writ.authz.lib.text

request := input.request

action_known if data.writ.actions[request.action]

action_spec := data.writ.actions[request.action] if action_known

else := {"risk": 0, "write": true}

risk := max({action_spec.risk, request.risk}) if request.risk != null

else := action_spec.risk

writes := object.get(action_spec, "write", true)

# --- chains

verdicts := [chain_verdict(i, c.edges) | some i, c in input.chains]

chain_verdict(i, edges) := {
	"index": i,
	"ok": both(base.ok, count(covering) == 0),
	"edges": base.edges,
	"problems": sort({p | some p in base.problems} | covering),
} if {
	base := chain.verdict(edges, request.principal, input.now, input.principals)
	covering := coverage_problems(edges)
}

coverage_problems(edges) := set() if {
	count(edges) == 0
} else := union({
	request_violation("actions", [request.action], last.scope.actions, who),
	request_violation("environments", [request.environment], last.scope.environments, who),
	fields_problems(last, who),
	resource_problems(last, who),
	risk_problems(last),
}) if {
	last := edges[count(edges) - 1]
	who := {"poss": concat("", ["the scope of edge ", last.id]), "edge": concat("", ["edge ", last.id])}
}

request_violation(dimension, requested, granted, who) := scope.values_violation(dimension, requested, granted, who)

fields_problems(last, who) := {msg |
	count(request.fields) == 0
	not "*" in last.scope.fields
	msg := concat("", [
		"fields: the whole resource (no fields listed) needs fields [*], not in ",
		who.poss, " ", text.list(last.scope.fields),
	])
} if count(request.fields) == 0

else := request_violation("fields", request.fields, last.scope.fields, who)

resource_problems(last, who) := {msg |
	not scope.matches_any(request.resource, last.scope.resources)
	msg := concat("", ["resources: ", request.resource, " is not within ", who.poss, " ", text.list(last.scope.resources)])
}

risk_problems(last) := {msg |
	risk > scope.risk_max(last.scope)
	msg := concat("", [
		"risk: ", text.num(risk), " exceeds the risk_max ", text.num(scope.risk_max(last.scope)),
		" of edge ", last.id,
	])
}

valid_indexes := {v.index | some v in verdicts; v.ok}

chain_index := min(valid_indexes) if count(valid_indexes) > 0

else := null

chain_reasons := set() if {
	chain_index != null
} else := {msg |
	count(input.chains) == 0
	msg := concat("", ["no candidate chain from governance to ", request.principal])
} if {
	count(input.chains) == 0
} else := {msg |
	some v in verdicts
	some p in array.concat([p | some e in v.edges; some p in e.problems], v.problems)
	msg := concat("", ["chain ", text.num(v.index), ": ", p])
}

# --- action catalogue

action_reasons := set() if action_known

else := {concat("", ["action ", request.action, " is not in the action catalogue"])}

# --- resource class, ownership, obligations

# The resource class rules matching the requested key (indexes), and the one that governs it.
matching_rules := resource_class.matching(request.resource)

rule := resource_class.most_specific(matching_rules)

field_map := object.get(rule, "fields", {})

field_classes := {f: object.get(field_map, f, rule.class) | some f in request.fields} if count(field_map) > 0

else := {}

# The classes a write touches: the requested fields' classes, or for a whole-resource request the
# resource's class and every field's class.
touched_classes := {c | some c in field_classes} if {
	count(request.fields) > 0
	count(field_map) > 0
} else := {rule.class} | {c | some c in field_map}

touched_fields := {f | some f in request.fields} if count(request.fields) > 0

else := {f | some f, _ in field_map}

# A conflict domain is always scoped (per site, say), never global by accident: the rule says where the
# scope comes from (`conflict_scope`: a segment of the key, or a fixed value) and the domain must be
# declared in data.writ.conflict_domains. The obligation is NAME:SCOPE (coordination key domain:NAME:SCOPE).
domain_name := rule.conflict_domain if {
	rule.conflict_domain
} else := min(domains) if {
	domains := {d | some f in touched_fields; d := object.get(object.get(rule, "field_conflict_domains", {}), f, null); d != null}
	count(domains) > 0
} else := null

domain_scope := split(request.resource, ":")[rule.conflict_scope.segment] if {
	is_number(rule.conflict_scope.segment)
} else := rule.conflict_scope.value if {
	is_string(rule.conflict_scope.value)
}

domain_declared if data.writ.conflict_domains[domain_name]

conflict_domain := concat(":", [domain_name, domain_scope]) if {
	domain_name != null
	domain_declared
	domain_scope != ""
} else := null

domain_reasons := set() if {
	domain_name == null
} else := set() if {
	conflict_domain != null
} else := {concat("", [
	"conflict domain ", domain_name, " of resource class ", rule.pattern,
	" is not declared in data.writ.conflict_domains or has no conflict_scope for ", request.resource,
])}

threshold_exceeded(threshold) if risk > threshold

approval_threshold := data.writ.approval_threshold[request.environment]

approval_required if threshold_exceeded(approval_threshold)

obligations := {
	"lease_required": both(writes, "WRITE_EXCLUSIVE" in touched_classes),
	"version_required": both(writes, count({"WRITE_EXCLUSIVE", "WRITE_OPTIMISTIC"} & touched_classes) > 0),
	"approval_required": approval_required,
	"resource_class": rule.class,
	"field_classes": field_classes,
	"conflict_domain": conflict_domain,
}

default approval_required := false

# Managed state needs a resolved owner for every requested field (reads excepted).
ownership_reasons := set() if {
	not writes
} else := set() if {
	not rule.managed
} else := {concat("", ["no owner is resolved for managed resource ", request.resource])} if {
	count(input.owners) == 0
} else := {msg |
	some o in input.owners
	o.owner == null
	msg := missing_owner(o.field)
}

missing_owner("*") := concat("", ["no owner for managed resource ", request.resource, " (whole resource)"])

missing_owner(field) := concat("", ["no owner for field ", field, " of managed resource ", request.resource]) if field != "*"

# --- registered keys: a key no resource class matches is unknown (the service refuses it with
# UNKNOWN_RESOURCE before the policy runs; a policy evaluated directly denies it too).

registration_reasons := set() if {
	count(matching_rules) > 0
} else := {concat("", ["resource ", request.resource, " matches no resource class in data.writ.resource_classes"])}

# --- declared fields: a resource class with "fields_closed": true has no fields but those it lists
# (without it a field it does not list takes the class's own; a misspelt `titel` would be granted
# by a scope with fields [*] and written upstream as asked).

field_reasons := {msg |
	object.get(rule, "fields_closed", false) == true
	some f in request.fields
	f != "*"
	not declared_field(f)
	msg := concat("", [
		"fields: ", f, " is not a field of ", request.resource, " (its resource class ", rule.pattern,
		" declares only ", text.list([k | some k, _ in field_map]), ")",
	])
}

declared_field(f) if field_map[f]

# --- domain rules: every `deny` of a package below writ.authz.domain (see domain/owner_only.rego)
# adds its messages to the reasons, on top of chain authority.

domain_rule_reasons := {msg |
	some name
	some msg in data.writ.authz.domain[name].deny
}

# --- approval

approval_reasons := set() if {
	not approval_required
} else := {concat("", [
	"approval required: risk ", text.num(risk), " of ", request.action, " on ", request.resource,
	" is above the ", request.environment, " threshold ", text.num(approval_threshold),
	"; an approval by a principal with an approves edge to ", request.principal, " is needed",
])} if {
	input.approval == null
} else := set() if {
	some e in input.approval.edges
	approves(e)
} else := {concat("", [
	"approval by ", input.approval.by, " does not cover ", request.action, " on ", request.resource,
	" in ", request.environment, " at risk ", text.num(risk), ": it needs a live approves edge from ",
	input.approval.by, " to ", request.principal, " with that scope and risk_max >= ", text.num(risk),
])}

approves(e) if {
	e.kind == "approves"
	e.from == input.approval.by
	e.to == request.principal
	chain.live(e, input.now)
	count(scope.values_outside([request.action], e.scope.actions)) == 0
	count(scope.values_outside([request.environment], e.scope.environments)) == 0
	scope.matches_any(request.resource, e.scope.resources)
	scope.risk_max(e.scope) >= risk
}

both(a, b) if {
	a == true
	b == true
}

default both(_, _) := false

# --- verdict

reasons := sort(union({
	chain_reasons, action_reasons, ownership_reasons, approval_reasons,
	domain_reasons, registration_reasons, domain_rule_reasons, field_reasons,
}))

allow := count(reasons) == 0

# Denied only for want of an approval: a valid chain, and every reason is the approval's (none, or one
# that does not cover the request): an approval by a principal with an approves edge would allow it.
approval_missing if {
	count(reasons) > 0
	chain_index != null
	every r in reasons {
		r in approval_reasons
	}
}

default approval_missing := false
