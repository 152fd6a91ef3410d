package writ.authz.lib.instant_test

import data.writ.authz.lib.instant

test_iso8601 if {
	instant.iso(0) == "1970-01-01T00:00:00Z"
	instant.iso(1767225600000) == "2026-01-01T00:00:00Z"
	instant.iso(1768435200123) == "2026-01-15T00:00:00.123Z"
	instant.iso(951782400000) == "2000-02-29T00:00:00Z"
	instant.iso(4102444799999) == "2099-12-31T23:59:59.999Z"
}
