/**
 * Where a `writ serve` process's CPU goes, by class, from `perf` samples with call stacks: the main
 * thread (the event loop) and the other threads (libuv's pool: Ed25519, fdatasync; V8's helpers)
 * apart. Each sample falls in one class: a subsystem anywhere on its stack (Ed25519, fdatasync,
 * SQLite with the syscalls it makes, the garbage collector), else its innermost JavaScript frame
 * (Writ's own code, npm packages, Node's core library), else native networking or other native code.
 * Writ's own JavaScript is also split by its innermost function (`--functions N`: the N largest).
 *
 *   node --perf-prof dist/src/cli/main.js serve …                  # writes ./jit-PID.dump: every JIT code load, timed
 *   perf record -k mono -e cpu-clock -F 1999 -g -p PID -o perf.data -- sleep 10
 *   perf inject --jit -i perf.data -o perf.jit.data                  # the dump still where the server wrote it
 *   perf script -i perf.jit.data -F tid,ip,sym | node dist/bench/perf-classes.js [--functions 12]
 *   rm -f jit-*.dump jitted-*.so                                      # what --perf-prof and inject leave behind
 *
 * Not `--perf-basic-prof`: its /tmp/perf-PID.map has no times, and when V8 frees code and puts newer
 * code at the same address, perf may name a sample after the old entry: in a 10 s profile under load,
 * start-up code (fast-json-stringify compiling the route schemas) took up to 30% of the main thread. The
 * jitdump's code loads carry timestamps (hence `-k mono`), so `perf inject` names each sample after the
 * code that was at its address when it was taken.
 *
 * The main thread is the one with the most samples (its thread id is the process id). `--cpu-prof`
 * is no substitute here: it samples wall time, and blames whatever call a descheduled thread was in.
 */
import { createInterface } from 'node:readline';

// Frames are "ADDRESS SYMBOL"; the patterns name whole symbols or their prefixes, so that e.g. a kernel
// page fault (exc_page_fault) is not taken for Ed25519's ge_* nor V8's JavaScript parser for llhttp's.
const SUBSYSTEMS: [string, RegExp][] = [
  // OpenSSL's (node:crypto) and libsodium's (sodium-native: the server's since issue 10), whose static
  // field and group functions are often the innermost frames.
  ['Ed25519 (verify, and sign)', /ossl_ed25519|SignTraits::DeriveBits|\s_?crypto_sign_|\s(fe|ge|sc)25519_/],
  ['WAL fdatasync', /\sfdatasync|\s__x64_sys_fdatasync|\sdo_fsync|\sext4_sync_file/],
  ['SQLite (statements, COMMIT, their pwrite/pread)', /\ssqlite3|better_sqlite3|\sStatement::|\sDatabase::/],
  ['garbage collector', /v8::internal::(Heap::|Scaveng|MarkCompact|GCTracer|ConcurrentMarking|MinorMarkSweep)/],
];
const NETWORK = /llhttp|node::\S*Parser|StreamBase|LibuvStream|\suv__(read|write|stream)|\s(tcp|sock|inet|skb|ip|__sys)_|\s__x64_sys_(sendto|recvfrom|writev|read|write)\b|epoll/;

function jsFrameOf(frame: string): string | null {
  const sym = frame.replace(/^\S+\s+/, '');
  return sym.startsWith('JS:') ? sym : null;
}

function classOf(frames: string[]): { cls: string; writFunction?: string } {
  for (const [name, re] of SUBSYSTEMS) if (frames.some((f) => re.test(f))) return { cls: name };
  for (const frame of frames) {
    const js = jsFrameOf(frame);
    if (js === null) continue;
    if (js.includes('/dist/src/')) return { cls: "Writ's JavaScript", writFunction: js.replace(/^JS:[*^~]?/, '') };
    if (js.includes('node_modules/')) return { cls: "npm packages' JavaScript" };
    return { cls: "Node's core JavaScript (http, net, streams, promises)" };
  }
  return { cls: frames.some((f) => NETWORK.test(f)) ? 'native networking (llhttp, libuv, kernel)' : 'other native (V8 runtime, scheduler, libc)' };
}

async function main(): Promise<void> {
  const at = process.argv.indexOf('--functions');
  const topFunctions = at > 0 ? Number(process.argv[at + 1]) : 12;
  const samples: { tid: string; frames: string[] }[] = [];
  let current: { tid: string; frames: string[] } | null = null;
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line.trim() === '') continue;
    // A sample's header is its thread id alone (perf pads it with spaces); its frames follow, tab-indented.
    const header = /^\s*(\d+)\s*$/.exec(line);
    if (header) {
      current = { tid: header[1]!, frames: [] };
      samples.push(current);
    } else current?.frames.push(line.trim());
  }
  const perThread = new Map<string, number>();
  for (const s of samples) perThread.set(s.tid, (perThread.get(s.tid) ?? 0) + 1);
  const main = [...perThread].sort((a, b) => b[1] - a[1])[0]?.[0];
  const groups = new Map<string, Map<string, number>>([['main thread', new Map()], ['other threads', new Map()]]);
  const totals = new Map<string, number>();
  const writFunctions = new Map<string, number>();
  for (const s of samples) {
    const group = s.tid === main ? 'main thread' : 'other threads';
    const { cls, writFunction } = classOf(s.frames);
    const counts = groups.get(group)!;
    counts.set(cls, (counts.get(cls) ?? 0) + 1);
    totals.set(group, (totals.get(group) ?? 0) + 1);
    if (group === 'main thread' && writFunction) writFunctions.set(writFunction, (writFunctions.get(writFunction) ?? 0) + 1);
  }
  for (const [group, counts] of groups) {
    const total = totals.get(group) ?? 0;
    console.log(`${group}: ${total} samples${group === 'main thread' ? ` (thread ${main})` : ''}`);
    for (const [cls, n] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`  ${((100 * n) / total).toFixed(1).padStart(5)}%  ${String(n).padStart(6)}  ${cls}`);
  }
  const mainTotal = totals.get('main thread') ?? 0;
  console.log(`Writ's JavaScript on the main thread, by innermost function (share of the main thread):`);
  for (const [fn, n] of [...writFunctions].sort((a, b) => b[1] - a[1]).slice(0, topFunctions)) console.log(`  ${((100 * n) / mainTotal).toFixed(1).padStart(5)}%  ${fn}`);
}

await main();
