package writ.authz.delegation_test

import data.writ.authz.delegation
import data.writ.authz.fixtures_test as f

proposed(overrides) := f.edge(f.delegate, overrides)

violations(overrides) := r.violations if {
	r := delegation with input as f.delegation_input(proposed(overrides))
	not r.allow
	r.chain_index == null
}

test_allows_a_narrower_delegation if {
	r := delegation with input as f.delegation_input(f.delegate)
	r.allow
	r.violations == []
	r.chain_index == 0
}

test_allows_an_equal_delegation_with_one_less_depth if {
	r := delegation with input as f.delegation_input(proposed({"scope": f.grant.scope, "max_depth": 1}))
	r.allow
}

test_refuses_wider_actions if {
	violations({"scope": {"actions": ["deploy", "update_post"]}}) == ["actions: deploy is not in the delegator's [publish_post, update_post]"]
}

test_refuses_a_wildcard_action_under_a_list if {
	violations({"scope": {"actions": ["*"]}}) == ["actions: * is not in the delegator's [publish_post, update_post]"]
}

test_refuses_wider_resources if {
	violations({"scope": {"resources": ["wp:**"]}}) == ["resources: wp:** is not within the delegator's [wp:post:*]"]
}

test_refuses_wider_environments if {
	violations({"scope": {"environments": ["development", "production"]}}) == ["environments: development is not in the delegator's [production, staging]"]
}

test_refuses_wider_fields if {
	narrow_parent := object.union(f.delegation_input(f.delegate), {"chains": [{"edges": [f.edge(f.grant, {"scope": {"fields": ["meta_description", "title"]}})]}]})
	r := delegation with input as object.union(narrow_parent, {"proposed": {"scope": {"fields": ["body", "title"]}}})
	not r.allow
	r.violations == ["fields: body is not in the delegator's [meta_description, title]"]
}

test_refuses_higher_risk if {
	violations({"scope": {"constraints": {"risk_max": 3}}}) == ["risk: 3 exceeds the delegator's risk_max 2"]
}

test_refuses_a_later_expiry if {
	parent := f.edge(f.grant, {"expires_at": f.now + (14 * f.day)})
	given := object.union(f.delegation_input(proposed({"expires_at": f.now + (31 * f.day)})), {"chains": [{"edges": [parent]}]})
	r := delegation with input as given
	r.violations == ["time window: expires_at 2026-02-01T00:00:00Z is after the delegator's 2026-01-15T00:00:00Z"]
}

test_refuses_an_unbounded_expiry_under_a_bounded_parent if {
	parent := f.edge(f.grant, {"expires_at": f.now + (14 * f.day)})
	given := object.union(f.delegation_input(f.delegate), {"chains": [{"edges": [parent]}]})
	r := delegation with input as given
	r.violations == ["time window: expires_at is unbounded but the delegator's ends at 2026-01-15T00:00:00Z"]
}

test_refuses_an_earlier_start if {
	parent := f.edge(f.grant, {"not_before": f.now - f.day})
	given := object.union(f.delegation_input(proposed({"not_before": f.now - (2 * f.day)})), {"chains": [{"edges": [parent]}]})
	r := delegation with input as given
	r.violations == ["time window: not_before 2025-12-30T00:00:00Z is before the delegator's 2025-12-31T00:00:00Z"]
}

test_refuses_an_unbounded_start_under_a_bounded_parent if {
	parent := f.edge(f.grant, {"not_before": f.now - f.day})
	given := object.union(f.delegation_input(f.delegate), {"chains": [{"edges": [parent]}]})
	r := delegation with input as given
	r.violations == ["time window: not_before is unbounded but the delegator's starts at 2025-12-31T00:00:00Z"]
}

test_refuses_depth_when_the_delegator_has_none_left if {
	given := object.union(f.delegation_input(f.delegate), {"chains": [{"edges": [f.edge(f.grant, {"max_depth": 0})]}]})
	r := delegation with input as given
	r.violations == ["depth: the delegator's edge allows no further delegation (max_depth 0)"]
}

test_refuses_more_depth_than_left if {
	violations({"max_depth": 2}) == ["depth: max_depth 2 exceeds the 1 left by the delegator's max_depth 2"]
}

test_lists_every_exceeding_dimension if {
	count(violations({"scope": {"actions": ["deploy"], "constraints": {"risk_max": 3}}, "max_depth": 5})) == 3
}

test_refuses_without_a_valid_chain if {
	revoked := f.edge(f.grant, {"revoked_at": f.now})
	given := object.union(f.delegation_input(f.delegate), {"chains": [{"edges": [revoked]}]})
	r := delegation with input as given
	not r.allow
	r.violations == [
		"chain: orchestrator holds no valid chain from governance",
		"chain: candidate 0: edge g-orch (governance → orchestrator) was revoked at 2026-01-01T00:00:00Z",
	]
}

test_refuses_without_any_candidate if {
	r := delegation with input as object.union(f.delegation_input(f.delegate), {"chains": []})
	r.violations == ["chain: orchestrator holds no valid chain from governance"]
}

test_reports_the_closest_valid_chain if {
	narrow := f.edge(f.grant, {"id": "g-narrow", "scope": {"actions": ["read_post"], "fields": ["tags"]}})
	wide := f.edge(f.grant, {"id": "g-wide", "scope": {"fields": ["tags"]}})
	given := object.union(f.delegation_input(f.delegate), {"chains": [{"edges": [narrow]}, {"edges": [wide]}]})
	r := delegation with input as given
	r.violations == ["fields: meta_description, title are not in the delegator's [tags]"]
}

test_allows_through_a_later_chain if {
	revoked := f.edge(f.grant, {"revoked_at": f.now})
	given := object.union(f.delegation_input(f.delegate), {"chains": [{"edges": [revoked]}, {"edges": [f.grant]}]})
	r := delegation with input as given
	r.allow
	r.chain_index == 1
}
