import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * Ed25519 signature checks on a worker thread of their own, with libsodium: the server's event loop
 * hands over the caller assertion of a request while it is busy (jws.ts `verifyJwsSignatureAsync`), and
 * parses, evaluates and commits other requests meanwhile.
 *
 * Why a worker and not libuv's pool: sodium-native has no asynchronous check, and node:crypto's (OpenSSL
 * on the pool) costs ~96 µs a check here against libsodium's ~43 µs; the pool's version was measured
 * and replaced by libsodium inline (bench/RESULTS.md, issue 10). This keeps libsodium and moves it off
 * the loop. The checks of one turn of the event loop go in one message (`setImmediate`), as one
 * transferred buffer of [public key 32 | signature 64 | length u32 | data] records, and come back as
 * one message of results; so the hand-off costs two messages a batch, not a request.
 *
 * The worker is started on first use and keeps the process alive only while it holds checks. If it fails or exits, the
 * checks it held are made here, inline, and so is every later one (`failed`): an answer is never lost
 * and never guessed. A job's bytes are read when its batch is sent, at the end of the turn: a caller
 * leaves its buffers alone until the answer (jws.ts hands over fresh ones).
 */
const WORKER_SOURCE = `(async () => {
const { workerData, parentPort } = await import('node:worker_threads');
const { createRequire } = await import('node:module');
const sodium = createRequire(workerData.library)(workerData.library);
parentPort.on('message', ({ id, buffer }) => {
  const batch = Buffer.from(buffer);
  const count = batch.readUInt32LE(0);
  const results = new Uint8Array(count);
  let at = 4;
  for (let i = 0; i < count; i++) {
    const publicKey = batch.subarray(at, at + 32);
    const signature = batch.subarray(at + 32, at + 96);
    const length = batch.readUInt32LE(at + 96);
    const data = batch.subarray(at + 100, at + 100 + length);
    at += 100 + length;
    try {
      results[i] = sodium.crypto_sign_verify_detached(signature, data, publicKey) ? 1 : 0;
    } catch {
      results[i] = 0;
    }
  }
  parentPort.postMessage({ id, results }, [results.buffer]);
});
})();`;

/** The bytes of one check: a raw 32-byte public key, a 64-byte signature, the signed data. */
type Check = (publicKey: Uint8Array, data: Uint8Array, signature: Uint8Array) => boolean;

interface Job {
  publicKey: Uint8Array;
  data: Uint8Array;
  signature: Uint8Array;
  resolve: (valid: boolean) => void;
}

export class Ed25519VerifyWorker {
  #worker: Worker | null = null;
  #failed = false;
  #queue: Job[] = [];
  #nextId = 0;
  readonly #inFlight = new Map<number, Job[]>();
  #fallbacks = 0;

  /**
   * `inline` is the same check on this thread: used when the worker cannot be. `library`: the module
   * the worker loads, exporting sodium-native's `crypto_sign_verify_detached` (a test gives one that
   * fails or kills the worker).
   */
  constructor(
    private readonly inline: Check,
    private readonly library: string = createRequire(import.meta.url).resolve('sodium-native'),
  ) {}

  /** Whether `signature` is a valid Ed25519 signature of `data` by the raw `publicKey` (32 bytes; the signature 64). */
  verify(publicKey: Uint8Array, data: Uint8Array, signature: Uint8Array): Promise<boolean> {
    // (libsodium itself reads the first 64 bytes of a longer signature: the length is checked here.)
    if (publicKey.length !== 32 || signature.length !== 64) return Promise.resolve(false);
    if (this.#failed) return Promise.resolve(this.#inline(publicKey, data, signature));
    return new Promise((resolve) => {
      if (this.#queue.push({ publicKey, data, signature, resolve }) === 1) setImmediate(this.#send);
    });
  }

  /** Checks handed to this worker that were made inline instead, because it had failed or exited (the server's metrics read it). */
  get fallbacks(): number {
    return this.#fallbacks;
  }

  /** Ends the worker (tests); checks it held are made inline, and so are later ones. */
  async stop(): Promise<void> {
    const worker = this.#worker;
    this.#fail();
    await worker?.terminate();
  }

  #send = (): void => {
    const jobs = this.#queue;
    this.#queue = [];
    if (jobs.length === 0) return;
    if (this.#failed) return this.#settleInline(jobs);
    const id = this.#nextId++;
    try {
      let size = 4;
      for (const job of jobs) size += 100 + job.data.length;
      const batch = Buffer.allocUnsafeSlow(size);
      batch.writeUInt32LE(jobs.length, 0);
      let at = 4;
      for (const job of jobs) {
        batch.set(job.publicKey, at);
        batch.set(job.signature, at + 32);
        batch.writeUInt32LE(job.data.length, at + 96);
        batch.set(job.data, at + 100);
        at += 100 + job.data.length;
      }
      const worker = this.#start();
      this.#inFlight.set(id, jobs);
      // Held checks keep the process alive until answered; an idle worker does not (the 'message' handler unrefs it).
      worker.ref();
      worker.postMessage({ id, buffer: batch.buffer }, [batch.buffer]);
    } catch (e) {
      this.#inFlight.delete(id);
      this.#fail(e);
      this.#settleInline(jobs);
    }
  };

  #start(): Worker {
    if (this.#worker) return this.#worker;
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { library: this.library } });
    worker.on('message', ({ id, results }: { id: number; results: Uint8Array }) => {
      const jobs = this.#inFlight.get(id);
      if (!jobs) return;
      this.#inFlight.delete(id);
      if (this.#inFlight.size === 0) worker.unref();
      for (let i = 0; i < jobs.length; i++) jobs[i]!.resolve(results[i] === 1);
    });
    worker.on('error', (e) => this.#fail(e));
    worker.on('exit', (code) => this.#fail(new Error(`it exited with code ${code}`)));
    // After the listeners (adding a 'message' one refs the worker again): a process that is otherwise done exits.
    worker.unref();
    this.#worker = worker;
    return worker;
  }

  /** From now on every check is made inline; `reason` (none when stopped on purpose) is reported once. */
  #fail(reason?: unknown): void {
    if (!this.#failed && reason !== undefined) {
      process.emitWarning(`Ed25519 worker thread failed (${reason instanceof Error ? reason.message : String(reason)}): signature checks are made on the event loop from now on`, { code: 'WRIT_ED25519_WORKER' });
    }
    this.#failed = true;
    this.#worker = null;
    const held = [...this.#inFlight.values()];
    this.#inFlight.clear();
    for (const jobs of held) this.#settleInline(jobs);
  }

  #settleInline(jobs: Job[]): void {
    for (const job of jobs) job.resolve(this.#inline(job.publicKey, job.data, job.signature));
  }

  #inline(publicKey: Uint8Array, data: Uint8Array, signature: Uint8Array): boolean {
    this.#fallbacks += 1;
    try {
      return this.inline(publicKey, data, signature);
    } catch {
      return false;
    }
  }
}
