package writ.authz.decision_test

import data.writ.authz.decision
import data.writ.authz.fixtures_test as f

test_allows_a_good_chain if {
	r := decision with input as f.decision_input
	r.allow
	r.reasons == []
	r.chain_index == 0
	r.risk == 1
	r.chains[0].ok
}

test_obligations_follow_the_field_class if {
	r := decision with input as f.decision_input
	r.obligations == {
		"lease_required": true,
		"version_required": true,
		"approval_required": false,
		"resource_class": "WRITE_EXCLUSIVE",
		"field_classes": {"title": "WRITE_EXCLUSIVE"},
		"conflict_domain": null,
	}
}

test_optimistic_field_needs_a_version_but_no_lease if {
	r := decision with input as object.union(f.with_request({"fields": ["meta_description"]}), {"owners": [{"field": "meta_description", "owner": "seo-control-plane", "edge_id": "o-seo"}]})
	r.allow
	not r.obligations.lease_required
	r.obligations.version_required
	r.obligations.field_classes == {"meta_description": "WRITE_OPTIMISTIC"}
}

test_canonical_field_is_in_the_seo_conflict_domain if {
	grant := f.edge(f.grant, {"to": "seo-agent-7"})
	r := decision with input as object.union(
		f.with_edges([grant]),
		{"request": {"fields": ["canonical"]}, "owners": [{"field": "canonical", "owner": "seo-control-plane", "edge_id": "o-seo"}]},
	)
	r.allow
	r.obligations.conflict_domain == "SEO_METADATA:example.com"
}

test_template_resource_has_its_conflict_domain if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"actions": ["update_template"], "resources": ["site:**"]}})
	r := decision with input as object.union(
		f.with_edges([grant]),
		{"request": {"action": "update_template", "resource": "site:example.com:template:canonical", "fields": []}, "owners": [{"field": "*", "owner": "seo-control-plane", "edge_id": "o-tpl"}]},
	)
	r.allow
	r.obligations.conflict_domain == "SEO_METADATA:example.com"
	r.obligations.lease_required
}

test_conflict_domains_are_scoped_per_site if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"actions": ["update_template", "bulk_update_canonical"], "resources": ["site:**"]}})
	other := decision with input as object.union(
		f.with_edges([grant]),
		{"request": {"action": "update_template", "resource": "site:other.org:template:canonical", "fields": []}, "owners": [{"field": "*", "owner": "seo-control-plane", "edge_id": "o-tpl"}]},
	)
	other.obligations.conflict_domain == "SEO_METADATA:other.org"
	bulk := decision with input as object.union(
		f.with_edges([grant]),
		{"request": {"action": "bulk_update_canonical", "resource": "site:example.com:canonical-bulk", "fields": []}, "owners": [{"field": "*", "owner": "seo-control-plane", "edge_id": "o-bulk"}]},
	)
	bulk.obligations.conflict_domain == "SEO_METADATA:example.com"
}

test_a_conflict_domain_without_a_scope_is_a_denial if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"actions": ["update_template"], "resources": ["site:**"]}})
	unscoped := [{"pattern": "site:*:template:canonical", "class": "WRITE_EXCLUSIVE", "managed": false, "conflict_domain": "SEO_METADATA"}]
	r := decision with input as object.union(f.with_edges([grant]), {"request": {"action": "update_template", "resource": "site:example.com:template:canonical", "fields": []}, "owners": []})
		with data.writ.resource_classes as unscoped
	not r.allow
	r.reasons == ["conflict domain SEO_METADATA of resource class site:*:template:canonical is not declared in data.writ.conflict_domains or has no conflict_scope for site:example.com:template:canonical"]
	r.obligations.conflict_domain == null
}

test_an_undeclared_conflict_domain_is_a_denial if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"actions": ["update_template"], "resources": ["site:**"]}})
	undeclared := [{"pattern": "site:*:template:canonical", "class": "WRITE_EXCLUSIVE", "managed": false, "conflict_domain": "TYPO", "conflict_scope": {"segment": 1}}]
	r := decision with input as object.union(f.with_edges([grant]), {"request": {"action": "update_template", "resource": "site:example.com:template:canonical", "fields": []}, "owners": []})
		with data.writ.resource_classes as undeclared
	not r.allow
}

test_an_unregistered_key_is_denied if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"resources": ["**"]}})
	r := decision with input as object.union(f.with_edges([grant]), {"request": {"resource": "misc:thing", "fields": []}, "owners": []})
	not r.allow
	r.reasons == ["resource misc:thing matches no resource class in data.writ.resource_classes"]
}

test_run_job_is_in_the_catalogue_and_needs_the_jobs_lease if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"actions": ["run_job"], "resources": ["job:**"]}})
	r := decision with input as object.union(f.with_edges([grant]), {"request": {"action": "run_job", "resource": "job:daily-seo-publish", "fields": []}, "owners": []})
	r.allow
	r.risk == 1
	r.obligations.lease_required
	r.obligations.resource_class == "WRITE_EXCLUSIVE"
	r.obligations.conflict_domain == null
}

test_audit_read_is_a_read_on_audit_keys if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"actions": ["audit_read"], "resources": ["audit:principal:*"]}})
	r := decision with input as object.union(f.with_edges([grant]), {"request": {"action": "audit_read", "resource": "audit:principal:editor-alice", "fields": []}, "owners": []})
	r.allow
	r.risk == 0
	not r.obligations.lease_required
	not r.obligations.version_required
}

test_reads_need_no_owner_lease_or_version if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"actions": ["read_post"]}})
	r := decision with input as object.union(f.with_edges([grant]), {"request": {"action": "read_post"}, "owners": [{"field": "title", "owner": null, "edge_id": null}]})
	r.allow
	r.risk == 0
	not r.obligations.lease_required
	not r.obligations.version_required
}

test_picks_the_first_valid_chain if {
	revoked := f.edge(f.delegate, {"revoked_at": f.now - 1})
	r := decision with input as f.with_chains([{"edges": [f.grant, revoked]}, {"edges": [f.grant, f.delegate]}])
	r.allow
	r.chain_index == 1
	not r.chains[0].ok
	r.chains[0].edges[1].problems == ["edge d-orch-seo (orchestrator → seo-agent-7) was revoked at 2025-12-31T23:59:59.999Z"]
}

reasons(given) := r.reasons if {
	r := decision with input as given
	not r.allow
	r.chain_index == null
}

test_deny_no_candidate_chain if {
	reasons(f.with_chains([])) == ["no candidate chain from governance to seo-agent-7"]
}

test_deny_empty_chain if {
	reasons(f.with_edges([])) == ["chain 0: the chain is empty"]
}

test_deny_chain_ends_elsewhere if {
	reasons(f.with_edges([f.grant])) == ["chain 0: the chain ends at orchestrator, not at the requester seo-agent-7"]
}

test_deny_revoked_edge if {
	reasons(f.with_edges([f.grant, f.edge(f.delegate, {"revoked_at": f.now})])) == ["chain 0: edge d-orch-seo (orchestrator → seo-agent-7) was revoked at 2026-01-01T00:00:00Z"]
}

# A principal's revocation recorded ahead of `now` counts at once too.
test_deny_principal_revocation_recorded_ahead_of_now if {
	given := object.union(f.decision_input, {"principals": {"seo-agent-7": {"revoked_at": f.now + 1}}})
	reasons(given) == ["chain 0: principal seo-agent-7 on edge d-orch-seo (orchestrator → seo-agent-7) was revoked at 2026-01-01T00:00:00.001Z"]
}

# A revocation recorded "in the future" of `now` (by a replica whose clock is ahead) counts at once.
test_deny_revocation_recorded_ahead_of_now if {
	reasons(f.with_edges([f.grant, f.edge(f.delegate, {"revoked_at": f.now + 1})])) == ["chain 0: edge d-orch-seo (orchestrator → seo-agent-7) was revoked at 2026-01-01T00:00:00.001Z"]
}

test_deny_not_yet_valid_one_ms_before if {
	reasons(f.with_edges([f.grant, f.edge(f.delegate, {"not_before": f.now + 1})])) == ["chain 0: edge d-orch-seo (orchestrator → seo-agent-7) is not valid before 2026-01-01T00:00:00.001Z"]
}

test_allow_at_not_before if {
	r := decision with input as f.with_edges([f.grant, f.edge(f.delegate, {"not_before": f.now})])
	r.allow
}

test_deny_expired_at_expires_at if {
	reasons(f.with_edges([f.grant, f.edge(f.delegate, {"expires_at": f.now})])) == ["chain 0: edge d-orch-seo (orchestrator → seo-agent-7) expired at 2026-01-01T00:00:00Z"]
}

test_allow_one_ms_before_expiry if {
	r := decision with input as f.with_edges([f.grant, f.edge(f.delegate, {"expires_at": f.now + 1})])
	r.allow
}

test_deny_chain_not_starting_with_a_grant if {
	reasons(f.with_edges([f.edge(f.grant, {"kind": "delegate"}), f.delegate])) == ["chain 0: edge g-orch (governance → orchestrator) is a delegate edge; a chain starts with a grant"]
}

test_deny_chain_not_starting_at_governance if {
	reasons(f.with_edges([f.edge(f.grant, {"from": "editor"}), f.delegate])) == ["chain 0: edge g-orch (editor → orchestrator) does not start at governance"]
}

test_deny_grant_after_the_first_edge if {
	reasons(f.with_edges([f.grant, f.edge(f.delegate, {"kind": "grant"})])) == ["chain 0: edge d-orch-seo (orchestrator → seo-agent-7) is a grant edge; only delegate edges may follow the grant"]
}

test_deny_broken_chain if {
	reasons(f.with_edges([f.grant, f.edge(f.delegate, {"from": "editor"})])) == ["chain 0: edge d-orch-seo (editor → seo-agent-7) does not continue the chain: it starts at editor, the previous edge ends at orchestrator"]
}

test_deny_unknown_principal if {
	given := object.union(object.remove(f.decision_input, ["principals"]), {"principals": object.remove(f.principals, ["orchestrator"])})
	reasons(given) == ["chain 0: principal orchestrator on edge g-orch (governance → orchestrator) is unknown"]
}

test_deny_revoked_principal if {
	given := object.union(f.decision_input, {"principals": {"seo-agent-7": {"revoked_at": f.now - f.day}}})
	reasons(given) == ["chain 0: principal seo-agent-7 on edge d-orch-seo (orchestrator → seo-agent-7) was revoked at 2025-12-31T00:00:00Z"]
}

test_deny_revoked_governance if {
	given := object.union(f.decision_input, {"principals": {"governance": {"revoked_at": f.now}}})
	reasons(given) == ["chain 0: principal governance on edge g-orch (governance → orchestrator) was revoked at 2026-01-01T00:00:00Z"]
}

# A parent narrowed after the delegation was written narrows the child at decision time.
test_deny_parent_narrowed_since_delegation if {
	narrowed := f.edge(f.grant, {"scope": {"fields": ["meta_description"]}})
	reasons(f.with_edges([narrowed, f.delegate])) == [
		"chain 0: edge d-orch-seo (orchestrator → seo-agent-7) is wider than its parent: fields: title is not in edge g-orch's [meta_description]",
	]
}

test_deny_parent_without_depth if {
	reasons(f.with_edges([f.edge(f.grant, {"max_depth": 0}), f.delegate])) == ["chain 0: edge d-orch-seo (orchestrator → seo-agent-7) is wider than its parent: depth: edge g-orch allows no further delegation (max_depth 0)"]
}

test_deny_parent_expiring_before_child if {
	parent := f.edge(f.grant, {"expires_at": f.now + f.day})
	reasons(f.with_edges([parent, f.delegate])) == ["chain 0: edge d-orch-seo (orchestrator → seo-agent-7) is wider than its parent: time window: expires_at is unbounded but edge g-orch's ends at 2026-01-02T00:00:00Z"]
}

test_deny_action_not_in_scope if {
	reasons(f.with_request({"action": "read_post"})) == ["chain 0: actions: read_post is not in the scope of edge d-orch-seo [update_post]"]
}

test_deny_environment_not_in_scope if {
	reasons(f.with_request({"environment": "staging"})) == ["chain 0: environments: staging is not in the scope of edge d-orch-seo [production]"]
}

test_deny_fields_not_in_scope if {
	reasons(f.with_request({"fields": ["body", "tags", "title"]})) == ["chain 0: fields: body, tags are not in the scope of edge d-orch-seo [meta_description, title]"]
}

# wp:post:* declares its fields ("fields_closed": true): a field it does not list is denied, whatever
# the scope grants (fields [*] here), with the fields it has.
test_deny_field_a_closed_class_does_not_declare if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"fields": ["*"]}})
	r := decision with input as object.union(f.with_edges([grant]), {"request": {"fields": ["title", "titel"]}})
	not r.allow
	r.reasons == ["fields: titel is not a field of wp:post:1024 (its resource class wp:post:* declares only [body, canonical, meta_description, status, tags, title])"]
}

test_declared_fields_of_a_closed_class_allow if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"fields": ["*"]}})
	r := decision with input as object.union(f.with_edges([grant]), {"request": {"fields": ["title", "status"]}})
	r.allow
}

# Without "fields_closed" a field the class does not list takes the class's own.
test_an_open_class_takes_any_field_with_its_own_class if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"fields": ["*"]}})
	open := [object.remove(data.writ.resource_classes[0], ["fields_closed"])]
	r := decision with input as object.union(f.with_edges([grant]), {"request": {"fields": ["titel"]}})
		with data.writ.resource_classes as open
	r.allow
	r.obligations.field_classes == {"titel": "WRITE_EXCLUSIVE"}
}

test_deny_whole_resource_without_all_fields if {
	reasons(f.with_request({"fields": []})) == ["chain 0: fields: the whole resource (no fields listed) needs fields [*], not in the scope of edge d-orch-seo [meta_description, title]"]
}

test_deny_resource_not_in_scope if {
	reasons(f.with_request({"resource": "wp:page:7"})) == [
		"chain 0: resources: wp:page:7 is not within the scope of edge d-orch-seo [wp:post:*]",
		"resource wp:page:7 matches no resource class in data.writ.resource_classes",
	]
}

test_deny_declared_risk_above_scope if {
	reasons(f.with_request({"risk": 2})) == ["chain 0: risk: 2 exceeds the risk_max 1 of edge d-orch-seo"]
}

test_declared_risk_cannot_lower_the_catalogue_risk if {
	r := decision with input as f.with_request({"risk": 0})
	r.risk == 1
}

test_deny_unknown_action if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"actions": ["*"]}})
	r := decision with input as object.union(f.with_edges([grant]), {"request": {"action": "delete_everything"}})
	not r.allow
	r.reasons == ["action delete_everything is not in the action catalogue"]
}

test_deny_no_owner_for_a_field if {
	given := object.union(f.decision_input, {"owners": [{"field": "title", "owner": null, "edge_id": null}]})
	r := decision with input as given
	not r.allow
	r.chain_index == 0
	r.reasons == ["no owner for field title of managed resource wp:post:1024"]
}

test_deny_no_owner_for_the_whole_resource if {
	grant := f.edge(f.grant, {"to": "seo-agent-7"})
	given := object.union(f.with_edges([grant]), {"request": {"fields": []}, "owners": [{"field": "*", "owner": null, "edge_id": null}]})
	r := decision with input as given
	r.reasons == ["no owner for managed resource wp:post:1024 (whole resource)"]
}

test_deny_no_owner_resolution_at_all if {
	r := decision with input as object.union(f.decision_input, {"owners": []})
	r.reasons == ["no owner is resolved for managed resource wp:post:1024"]
}

test_unmanaged_resource_needs_no_owner if {
	grant := f.edge(f.grant, {"to": "seo-agent-7", "scope": {"resources": ["job:**"]}})
	r := decision with input as object.union(f.with_edges([grant]), {"request": {"resource": "job:daily-seo-publish"}, "owners": []})
	r.allow
}

# --- approval: publish_post has risk 2; a declared risk of 3 is above production's threshold 2.

approval_request := object.union(f.with_edges([f.edge(f.grant, {"to": "seo-agent-7", "scope": {"constraints": {"risk_max": 3}}})]), {"request": {"action": "publish_post", "risk": 3}})

approves := {
	"id": "a-editor-seo",
	"kind": "approves",
	"from": "editor",
	"to": "seo-agent-7",
	"scope": {"actions": ["publish_post"], "resources": ["wp:post:*"], "environments": ["production"], "fields": ["*"], "constraints": {"risk_max": 3}},
	"max_depth": null,
	"creator": "governance",
	"reason": "editor signs off risky publishing",
	"created_at": 0,
	"not_before": null,
	"expires_at": null,
	"revoked_at": null,
}

test_deny_approval_missing if {
	r := decision with input as approval_request
	not r.allow
	r.obligations.approval_required
	r.reasons == ["approval required: risk 3 of publish_post on wp:post:1024 is above the production threshold 2; an approval by a principal with an approves edge to seo-agent-7 is needed"]
	r.approval_missing
}

# Not only for want of an approval: the chain does not cover the request either.
test_approval_missing_is_false_beside_another_reason if {
	r := decision with input as object.union(approval_request, {"request": {"resource": "wp:page:1"}})
	not r.allow
	count(r.reasons) > 1
	not r.approval_missing
}

test_allow_with_approval if {
	r := decision with input as object.union(approval_request, {"approval": {"by": "editor", "edges": [approves]}})
	r.allow
	r.obligations.approval_required
	not r.approval_missing
}

test_deny_approval_not_covering if {
	weak := object.union(approves, {"scope": {"constraints": {"risk_max": 2}}})
	r := decision with input as object.union(approval_request, {"approval": {"by": "editor", "edges": [weak]}})
	not r.allow
	r.reasons == ["approval by editor does not cover publish_post on wp:post:1024 in production at risk 3: it needs a live approves edge from editor to seo-agent-7 with that scope and risk_max >= 3"]
	r.approval_missing
}

test_deny_approval_edge_expired if {
	old := object.union(approves, {"expires_at": f.now})
	r := decision with input as object.union(approval_request, {"approval": {"by": "editor", "edges": [old]}})
	not r.allow
}

test_no_approval_needed_where_no_threshold if {
	r := decision with input as object.union(approval_request, {"request": {"environment": "staging"}})
	r.allow
	not r.obligations.approval_required
}
