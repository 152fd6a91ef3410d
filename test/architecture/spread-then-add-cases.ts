// What test/architecture/spread-then-add.test.ts must find here (lines 4, 5 and 6) and must leave (line 8 only
// replaces a key; line 10 is marked). Imported by nothing; the line numbers are the test's.
export function cases(o: { via?: string; n: number }, c: boolean): unknown[] {
  const x = { ...o, via: o.via ?? 'v1' };
  const y = { ...o, ...(c && { extra: 1 }) };
  const h: Record<string, string | number> = { ...o };
  h['content-length'] = 3;
  const fine = { ...o, n: 2 };
  // spread-then-add: a marked one is left alone
  const marked = { ...o, other: 1 };
  return [x, y, h, fine, marked];
}
