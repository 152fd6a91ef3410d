# Which resource class rule (data.writ.resource_classes) governs a canonical key.
package writ.authz.lib.resource_class

import data.writ.authz.lib.scope

# A key no rule matches is not registered: the decision denies it (see decide.rego) and the
# service refuses it before the policy runs (UNKNOWN_RESOURCE). This stand-in only keeps the
# obligations well formed for such a denial: exclusive and unmanaged.
unknown_resource := {"pattern": "**", "class": "WRITE_EXCLUSIVE", "managed": false}

registered(key) if count(matching(key)) > 0

# The indexes of the rules whose pattern matches a key, in listed order.
matching(key) := [i |
	some i, r in data.writ.resource_classes
	scope.matches(key, r.pattern)
]

# The most specific matching rule: most literal segments, then one without a final "**", then
# most segments, then the rule listed first.
rule_for(key) := most_specific(matching(key))

# The most specific of the rules at these indexes (from `matching`).
most_specific(indexes) := data.writ.resource_classes[indexes[0]] if {
	count(indexes) == 1
} else := data.writ.resource_classes[0 - best[3]] if {
	count(indexes) > 1
	best := max({[literal_segments(r.pattern), bounded(r.pattern), count(split(r.pattern, ":")), 0 - i] |
		some i in indexes
		r := data.writ.resource_classes[i]
	})
} else := unknown_resource

literal_segments(pattern) := count([s |
	some s in split(pattern, ":")
	not s in {"*", "**"}
])

bounded(pattern) := 0 if endswith(pattern, "**")

else := 1
