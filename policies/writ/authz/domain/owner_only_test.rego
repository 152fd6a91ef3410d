package writ.authz.domain.owner_only_test

import data.writ.authz.decision
import data.writ.authz.fixtures_test as f

alice := f.principal("editor-alice", "human")

editor_grant := f.edge(f.grant, {"id": "g-editor-alice", "to": "editor-alice", "max_depth": 1})

# editor-alice updates the title of wp:post:1024 through her own grant; `owner` is resource.properties.ownerID.
editor_input(properties) := object.union(f.with_edges([editor_grant]), {
	"request": {"principal": "editor-alice"},
	"principals": object.union(f.principals, {"editor-alice": alice}),
	"properties": properties,
})

test_an_editor_may_update_her_own_item if {
	r := decision with input as editor_input({"subject": {}, "action": {}, "resource": {"ownerID": "editor-alice"}})
	r.allow
}

test_an_editor_may_not_update_someone_elses_item if {
	r := decision with input as editor_input({"subject": {}, "action": {}, "resource": {"ownerID": "editor-bob"}})
	not r.allow
	r.reasons == ["domain rule owner_only: editor-alice may update_post only items whose ownerID is its own id; wp:post:1024 has ownerID editor-bob"]
}

test_an_ownerid_that_is_not_a_string_is_a_denial if {
	r := decision with input as editor_input({"subject": {}, "action": {}, "resource": {"ownerID": 7}})
	not r.allow
	r.reasons == ["domain rule owner_only: resource.properties.ownerID of wp:post:1024 must be a principal id (a string)"]
}

test_without_ownerid_the_rule_does_not_apply if {
	r := decision with input as editor_input({"subject": {}, "action": {}, "resource": {}})
	r.allow
}

test_without_properties_at_all_the_default_policy_is_unchanged if {
	r := decision with input as object.remove(editor_input({}), ["properties"])
	r.allow
}

test_agents_are_not_editors if {
	# seo-agent-7 is an agent: the rule lists humans only.
	r := decision with input as object.union(f.decision_input, {"properties": {"resource": {"ownerID": "someone-else"}}})
	r.allow
}

test_the_rule_is_off_when_data_lists_no_actions if {
	r := decision with input as editor_input({"resource": {"ownerID": "editor-bob"}})
		with data.writ.domain_rules.owner_only as {"actions": [], "principal_kinds": ["human"]}
	r.allow
}
