# Shared fixtures for the policy tests: a CMS orchestrator granted update/publish on posts, which
# delegates title and meta_description updates to seo-agent-7.
package writ.authz.fixtures_test

# 2026-01-01T00:00:00Z
now := 1767225600000

day := 86400000

principal(id, kind) := {"id": id, "kind": kind, "priority_class": "agent", "revoked_at": null}

principals := {p.id: p |
	some p in [
		principal("governance", "governance"),
		principal("orchestrator", "agent"),
		principal("seo-agent-7", "agent"),
		principal("editor", "human"),
	]
}

grant := {
	"id": "g-orch",
	"kind": "grant",
	"from": "governance",
	"to": "orchestrator",
	"scope": {
		"actions": ["publish_post", "update_post"],
		"resources": ["wp:post:*"],
		"environments": ["production", "staging"],
		"fields": ["*"],
		"constraints": {"risk_max": 2},
	},
	"max_depth": 2,
	"creator": "governance",
	"reason": "orchestrates content",
	"created_at": 0,
	"not_before": null,
	"expires_at": null,
	"revoked_at": null,
}

delegate := {
	"id": "d-orch-seo",
	"kind": "delegate",
	"from": "orchestrator",
	"to": "seo-agent-7",
	"scope": {
		"actions": ["update_post"],
		"resources": ["wp:post:*"],
		"environments": ["production"],
		"fields": ["meta_description", "title"],
		"constraints": {"risk_max": 1},
	},
	"max_depth": 0,
	"creator": "orchestrator",
	"reason": "seo metadata only",
	"created_at": 0,
	"not_before": null,
	"expires_at": null,
	"revoked_at": null,
}

edge(base, overrides) := object.union(base, overrides)

request := {
	"principal": "seo-agent-7",
	"action": "update_post",
	"resource": "wp:post:1024",
	"environment": "production",
	"fields": ["title"],
	"risk": null,
}

decision_input := {
	"now": now,
	"request": request,
	"principals": principals,
	"chains": [{"edges": [grant, delegate]}],
	"owners": [{"field": "title", "owner": "content-control-plane", "edge_id": "o-post"}],
	"approval": null,
}

with_chains(chains) := object.union(decision_input, {"chains": chains})

with_edges(edges) := with_chains([{"edges": edges}])

with_request(overrides) := object.union(decision_input, {"request": overrides})

# May the orchestrator (holding `grant`) hand `proposed` to seo-agent-7?
delegation_input(proposed) := {
	"now": now,
	"proposed": proposed,
	"principals": principals,
	"chains": [{"edges": [grant]}],
}
