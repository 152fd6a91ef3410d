package writ.authz.lib.resource_class_test

import data.writ.authz.lib.resource_class

rules := [
	{"pattern": "site:**", "class": "READ_SHARED", "managed": false},
	{"pattern": "site:*:*", "class": "WRITE_OPTIMISTIC", "managed": false},
	{"pattern": "site:example.com:*", "class": "WRITE_EXCLUSIVE", "managed": true},
	{"pattern": "site:example.com:**", "class": "MULTI_WRITER_MERGEABLE", "managed": false},
]

test_most_literal_segments_win if {
	r := resource_class.rule_for("site:example.com:robots") with data.writ.resource_classes as rules
	r.class == "WRITE_EXCLUSIVE"
}

test_a_star_is_more_specific_than_a_double_star if {
	r := resource_class.rule_for("site:other.org:robots") with data.writ.resource_classes as rules
	r.class == "WRITE_OPTIMISTIC"
}

test_the_first_listed_rule_breaks_a_tie if {
	tied := [{"pattern": "a:*", "class": "READ_SHARED", "managed": false}, {"pattern": "*:b", "class": "WRITE_EXCLUSIVE", "managed": true}]
	r := resource_class.rule_for("a:b") with data.writ.resource_classes as tied
	r.class == "READ_SHARED"
}

test_unknown_resource_is_exclusive_and_unmanaged if {
	r := resource_class.rule_for("nowhere:1") with data.writ.resource_classes as rules
	r == {"pattern": "**", "class": "WRITE_EXCLUSIVE", "managed": false}
}

test_a_single_matching_rule_governs if {
	r := resource_class.rule_for("site:other.org:robots:txt") with data.writ.resource_classes as rules
	r.class == "READ_SHARED"
	single := resource_class.rule_for("site:a") with data.writ.resource_classes as array.concat([{"pattern": "other:*", "class": "READ_SHARED", "managed": false}], rules)
	single.class == "READ_SHARED"
	listed_last := resource_class.rule_for("x:y") with data.writ.resource_classes as array.concat(rules, [{"pattern": "x:*", "class": "WRITE_OPTIMISTIC", "managed": true}])
	listed_last.class == "WRITE_OPTIMISTIC"
}

test_matching_lists_every_matching_rule_in_order if {
	resource_class.matching("site:example.com:robots") == [0, 1, 2, 3] with data.writ.resource_classes as rules
	resource_class.matching("site:example.com") == [0, 3] with data.writ.resource_classes as rules
	resource_class.matching("nowhere:1") == [] with data.writ.resource_classes as rules
	resource_class.registered("site:a:b") with data.writ.resource_classes as rules
	not resource_class.registered("nowhere:1") with data.writ.resource_classes as rules
}
