# An example domain rule on top of chain authority: for the actions and principal kinds listed in
# data.writ.domain_rules.owner_only, when the caller (a PEP, through AuthZEN resource.properties)
# says who owns the item, only that principal may do it — "editors may update only items whose
# ownerID is their own id". A request that says nothing about ownerID is not affected.
#
# input.properties are the caller's claims, not facts Writ checked: a rule like this one is as
# trustworthy as the PEP that supplies ownerID. Every `deny` message becomes a reason of the decision.
package writ.authz.domain.owner_only

applies if {
	input.request.action in data.writ.domain_rules.owner_only.actions
	input.principals[input.request.principal].kind in data.writ.domain_rules.owner_only.principal_kinds
}

deny contains msg if {
	applies
	owner := input.properties.resource.ownerID
	is_string(owner)
	owner != input.request.principal
	msg := concat("", [
		"domain rule owner_only: ", input.request.principal, " may ", input.request.action,
		" only items whose ownerID is its own id; ", input.request.resource, " has ownerID ", owner,
	])
}

deny contains msg if {
	applies
	owner := input.properties.resource.ownerID
	not is_string(owner)
	msg := concat("", ["domain rule owner_only: resource.properties.ownerID of ", input.request.resource, " must be a principal id (a string)"])
}
