# Small text helpers for reasons an auditor reads.
package writ.authz.lib.text

# "[a, b]" with the values sorted.
list(values) := concat("", ["[", concat(", ", sort(values)), "]"])

# "a, b" with the values sorted.
joined(values) := concat(", ", sort(values))

is_are(values) := "is" if count(values) == 1

else := "are"

num(n) := json.marshal(n)

# Zero-padded decimal integer, at least `width` digits.
pad(n, width) := concat("", [substring("0000", 0, width - count(s)), s]) if {
	s := format_int(n, 10)
	count(s) < width
} else := format_int(n, 10)
