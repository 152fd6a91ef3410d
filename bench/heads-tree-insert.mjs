// HeadsTree alone (no database): a tree of `chains` leaves in memory, then `rounds` times `added` new chains
// in random places of the chain order put in with apply(), timed (bench/RESULTS.md, "The periodic checkpoint:
// new chains at a million"). Checks each root against headsRoot over the same leaves once (untimed).
//
//   node bench/heads-tree-insert.mjs <dist folder> [chains=1000000] [rounds=5] [added=100]
//
// Prints one JSON line per round: the wall time of apply(), the CPU time of this process meanwhile (the machine
// is shared: wall time is mostly waiting for a core), and the nodes it hashed (when the build counts them).
const [dist, chainsArg, roundsArg, addedArg] = process.argv.slice(2);
if (!dist) throw new Error('usage: node bench/heads-tree-insert.mjs <dist folder> [chains] [rounds] [added]');
const CHAINS = Number(chainsArg ?? 1_000_000);
const ROUNDS = Number(roundsArg ?? 5);
const ADDED = Number(addedArg ?? 100);

const { HeadsTree } = await import(`${dist}/src/audit/heads-tree.js`);
const { headsRoot } = await import(`${dist}/src/audit/checkpoint.js`);
const { createHash } = await import('node:crypto');
const GENESIS = '0'.repeat(64);
const hex = (s) => createHash('sha256').update(s).digest('hex');
const leaf = (chain, pos) => ({ chain, pos, hash: hex(`${chain}:${pos}`), floor_pos: 0, floor_hash: GENESIS });

const leaves = [];
for (let g = 1; g <= CHAINS; g++) leaves.push(leaf(`k:${String(g).padStart(7, '0')}`, 1 + (g % 5)));
let t0 = performance.now();
const tree = await HeadsTree.build(leaves);
console.log(JSON.stringify({ what: 'build', chains: CHAINS, ms: Math.round(performance.now() - t0) }));
// A fixed sequence of places (a small LCG), so that builds compare on the same inserts.
let seed = 12345;
const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
for (let r = 0; r < ROUNDS; r++) {
  const added = [];
  for (let i = 0; i < ADDED; i++) added.push(leaf(`k:${String(Math.floor(random() * CHAINS)).padStart(7, '0')}~${r}.${i}`, 1));
  t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const ok = await tree.apply(added);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  leaves.push(...added);
  console.log(JSON.stringify({ what: `${ADDED} new chains`, chains: tree.size, ms: Math.round(ms * 10) / 10, cpu_ms: Math.round((cpu.user + cpu.system) / 100) / 10, nodes_hashed: tree.hashedLast, ok }));
}
const expected = headsRoot(leaves);
if (tree.root() !== expected) throw new Error(`root differs: ${tree.root()} against headsRoot ${expected}`);
console.log(JSON.stringify({ what: 'root checked against headsRoot', ok: true }));
