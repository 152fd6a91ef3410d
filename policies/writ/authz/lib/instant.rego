# Renders millisecond timestamps as ISO-8601 UTC. The wasm target has no time.format, so the
# civil calendar is computed here (Howard Hinnant's days-to-civil algorithm).
package writ.authz.lib.instant

import data.writ.authz.lib.text

iso(ms) := concat("", [date, "T", clock, frac, "Z"]) if {
	whole := floor(ms)
	days := floor(whole / 86400000)
	in_day := whole - (days * 86400000)
	secs := floor(in_day / 1000)
	millis := in_day - (secs * 1000)
	date := civil_date(days)
	clock := concat(":", [
		text.pad(floor(secs / 3600), 2),
		text.pad(floor((secs % 3600) / 60), 2),
		text.pad(secs % 60, 2),
	])
	frac := fraction(millis)
}

fraction(millis) := "" if millis == 0

else := concat("", [".", text.pad(millis, 3)])

civil_date(days) := concat("-", [text.pad(year, 4), text.pad(month, 2), text.pad(day, 2)]) if {
	z := days + 719468
	era := floor(z / 146097)
	doe := z - (era * 146097)
	yoe := floor((((doe - floor(doe / 1460)) + floor(doe / 36524)) - floor(doe / 146096)) / 365)
	doy := doe - (((365 * yoe) + floor(yoe / 4)) - floor(yoe / 100))
	mp := floor(((5 * doy) + 2) / 153)
	day := (doy - floor(((153 * mp) + 2) / 5)) + 1
	month := civil_month(mp)
	year := (yoe + (era * 400)) + january_or_february(month)
}

civil_month(mp) := mp + 3 if mp < 10

else := mp - 9

january_or_february(month) := 1 if month <= 2

else := 0
