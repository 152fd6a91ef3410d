package writ.authz.lib.scope_test

import data.writ.authz.lib.scope

test_literal_and_star_patterns if {
	scope.matches("wp:post:1024", "wp:post:*")
	scope.matches("wp:post:1024", "wp:post:1024")
	not scope.matches("wp:post:1024", "wp:post:1")
	not scope.matches("wp:post:1024:rev", "wp:post:*")
	not scope.matches("wp:post", "wp:post:*")
}

test_double_star_matches_zero_or_more_segments if {
	scope.matches("site:example.com", "site:example.com:**")
	scope.matches("site:example.com:template:canonical", "site:example.com:**")
	scope.matches("anything:at:all", "**")
	not scope.matches("site:other.org:robots", "site:example.com:**")
}

test_pattern_containment if {
	scope.pattern_within("wp:post:1", "wp:post:*")
	scope.pattern_within("wp:post:*", "wp:post:*")
	scope.pattern_within("wp:post:*", "wp:**")
	scope.pattern_within("site:x:**", "site:*:**")
	scope.pattern_within("site:x:**", "**")
	not scope.pattern_within("wp:post:*", "wp:post:1")
	not scope.pattern_within("wp:**", "wp:post:*")
	not scope.pattern_within("wp:**", "wp:*:**")
	not scope.pattern_within("wp:post:*", "wp:page:*")
}

test_values_outside if {
	scope.values_outside(["a", "b"], ["a"]) == {"b"}
	scope.values_outside(["*"], ["a"]) == {"*"}
	scope.values_outside(["*"], ["*"]) == set()
	scope.values_outside(["a"], ["*"]) == set()
}

test_missing_depth_allows_no_further_delegation if {
	scope.depth(null) == 0
	scope.depth(3) == 3
}

# Keys and patterns reach the policy as input: only strings match (a policy evaluated directly, as by
# `opa eval` or an OPA server, is given whatever its caller sends).
test_only_strings_match if {
	every pair in [[null, "**"], [5, "**"], [{"a": 1}, "**"], [5, 5], [null, null], ["wp", null], [["wp"], "wp:**"]] {
		not scope.matches(input.key, input.pattern) with input as {"key": pair[0], "pattern": pair[1]}
	}
}
