# Sums `callgrind_annotate --threshold=100` output (one dump) by where the instructions ran. With
# -v summary=1 prints "total v8-compiler libsodium sqlite-checkpoint" on one line (bench/instructions.sh
# names threads by it); otherwise a table of classes (bench/RESULTS.md, "Instructions per operation"),
# summed over every dump given (e.g. the threads of one round, annotated one after the other).
/PROGRAM TOTALS/ { gsub(",", "", $1); total += $1; next }
/^ *[0-9,]+ +\(/ {
  n = $1; gsub(",", "", n)
  c = "node (C++: V8 runtime and interpreter support, bindings)"
  if ($0 ~ /v8::internal::compiler::|v8::internal::maglev::|v8::internal::OptimizingCompile|v8::internal::Pipeline/) c = "V8 optimizing compiler"
  else if ($0 ~ /Scaveng|MarkCompact|v8::internal::Heap::|MarkingVisitor|MinorMark|ConcurrentMark|IncrementalMarking|Sweeper|Evacuat|RememberedSet|SlotSet|MemoryAllocator|MarkingBarrier/) c = "V8 garbage collector"
  else if ($0 ~ /sodium-native/) c = "libsodium (Ed25519 verify)"
  else if ($0 ~ /better_sqlite3/) c = "SQLite + better-sqlite3"
  else if ($0 ~ /\[\?\?\?\]/) c = "JIT code (anonymous: Sparkplug/Maglev/TurboFan output, regexp)"
  else if ($0 ~ /Builtins_/) c = "V8 builtins (bytecode handlers, ICs, embedded builtins)"
  else if ($0 ~ /libc\.so|ld-linux/) c = "libc"
  else if ($0 ~ /sha256_block|sha512_block|EVP_|OPENSSL|ossl_|libcrypto|ED25519|x25519|fe51_|ge_/) c = "OpenSSL (node:crypto)"
  else if ($0 ~ / uv_|:uv_|uv__/) c = "libuv"
  else if ($0 ~ /llhttp/) c = "llhttp (HTTP parser)"
  s[c] += n
  if ($0 ~ /sqlite3WalCheckpoint|walCheckpoint/) ckpt += n
}
END {
  if (summary) { printf "%d %d %d %d\n", total, s["V8 optimizing compiler"], s["libsodium (Ed25519 verify)"], ckpt; exit }
  for (c in s) printf "%14d %5.1f%%  %s\n", s[c], 100 * s[c] / total, c
  printf "%14d 100.0%%  total\n", total
}
