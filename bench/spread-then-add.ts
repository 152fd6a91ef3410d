/**
 * What an object literal that starts with a spread and then adds a key costs in this Node, against
 * the same object written as a literal, and with the new key first (see
 * test/architecture/spread-then-add.test.ts). `npx tsc -p tsconfig.json && node dist/bench/spread-then-add.js`
 */
const N = 500_000;
function params(i: number) {
  return { lease_id: `l${i}`, holder: 'h', instance: 'x', token_hash: 't', priority: 1, now: i, expires_at: i + 1, ttl: 5 };
}
type P = ReturnType<typeof params>;
const variants: [string, (p: P) => { now: number }][] = [
  ['{ ...p, key }: a spread, then a key p lacks', (p) => ({ ...p, key: 1 })],
  ['{ ...p, now }: a spread, then a key p has', (p) => ({ ...p, now: 1 })],
  ['{ key, ...p }: the new key first', (p) => ({ key: 1, ...p })],
  ['the same object as a literal', (p) => ({ lease_id: p.lease_id, holder: p.holder, instance: p.instance, token_hash: p.token_hash, priority: p.priority, now: p.now, expires_at: p.expires_at, ttl: p.ttl, key: 1 })],
];
for (let round = 0; round < 3; round++) {
  for (const [name, make] of variants) {
    let sum = 0;
    const t = process.hrtime.bigint();
    for (let i = 0; i < N; i++) sum += make(params(i)).now;
    const ns = Number(process.hrtime.bigint() - t) / N;
    if (sum < 0) throw new Error('unreachable');
    console.log(`round ${round + 1}  ${name.padEnd(48)} ${ns.toFixed(0).padStart(6)} ns a call (with making p)`);
  }
}
