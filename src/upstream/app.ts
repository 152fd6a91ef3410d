/**
 * The SAMPLE UPSTREAM: a small content store shipped with Writ for the demo and the tests. It stands
 * in for a real CMS (every response says so in `X-Sample-Upstream: writ`) and is a separate system:
 * its own process, its own SQLite file, reached over HTTP like any upstream.
 *
 * - `GET /posts/:id` → `{ id, revision, fields, field_revisions, updated_by, fences, fencing_epoch,
 *   last_receipt }`, `ETag: "<revision>"`. `fences` is `{ key: highest epoch }`, `fencing_epoch` the
 *   highest of them (null if none), `field_revisions` `{ field: revision that last wrote it }`.
 * - `PUT /posts/:id` `{ fields }` partial update. `If-Match: "<revision>"` required (428 without).
 *   Field-versioned, as a CMS with per-field revisions would do: with `If-Match: "V"` a write of
 *   fields F is refused (412 `{ code: 'PRECONDITION_FAILED', current_revision, changed_fields }`) iff
 *   V is above the current revision or some field of F was written after V. Writers of different
 *   fields who read the same revision both succeed (31 → 32 → 33); nobody overwrites a field blind.
 *   `"0"` creates a missing post; on an existing one it conflicts iff F holds a field already written.
 * - `Writ-Fencing-Epoch`: a bare integer (key `*`, the post as a whole) or `key=epoch` pairs
 *   (`wp:post:1024#title=5, domain:SEO_METADATA=3`; each pair splits on its last '='). Fences are kept
 *   per (post, key): a write with ANY key below that key's highest accepted epoch → 409
 *   `{ code: 'STALE_FENCING_EPOCH', key, highest }`; equal is fine, unseen keys pass, only accepted
 *   writes raise them; a malformed header → 400. Fences are checked before the revision.
 * - `Writ-Principal` and `Writ-Receipt-Id` are recorded; a receipt id already applied to the post is
 *   answered with its revision and `Writ-Replayed: true`, writing nothing.
 * - `POST /posts/:id/merge` `{ tags: { add, remove } }` tag merge (no If-Match, still fenced).
 * - `GET /posts/:id/history`, `GET /posts/:id/writes/:receiptId` → `{ applied, revision? }`,
 *   `GET /writes` accepted writes per post, `GET /requests?post=&after=` every request received
 *   (refused ones too; not the inspection endpoints themselves).
 */
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import { systemClock, type Clock } from '../clock.js';
import { POST_FIELDS, SampleContentStore, type Post, type PostFields, type WriteOutcome } from './content-store.js';
import { openUpstreamDatabase } from './database.js';
import { parseFencingEpochs, type FencingEpochs } from '../wire/fencing-header.js';

export interface SampleUpstreamOptions {
  /** SQLite file of the content store (created if absent); ':memory:' for tests. */
  dbFile: string;
  logger?: FastifyServerOptions['logger'];
  clock?: Clock;
}

const POST_ID = { type: 'string', pattern: '^[A-Za-z0-9._~-]{1,200}$' } as const;
const FIELD_SCHEMAS: Record<(typeof POST_FIELDS)[number], object> = {
  title: { type: 'string' },
  body: { type: 'string' },
  meta_description: { type: 'string' },
  tags: { type: 'array', items: { type: 'string' } },
  canonical: { type: 'string' },
  status: { type: 'string' },
};
const UNLOGGED_ROUTES = new Set(['/requests', '/writes', '/healthz']);

export function createSampleUpstream(options: SampleUpstreamOptions): FastifyInstance {
  const db = openUpstreamDatabase(options.dbFile);
  const clock = options.clock ?? systemClock;
  const store = new SampleContentStore(db, clock);
  // `Writ-Deadline` (ms since the epoch): a write that arrives after it is refused, so once the deadline
  // has passed, "not applied" is final and Writ may settle a PENDING receipt as FAILED.
  const pastDeadline = (req: FastifyRequest): boolean => {
    const raw = header(req, 'writ-deadline');
    return raw !== null && /^\d{1,16}$/.test(raw) && clock.now() > Number(raw);
  };
  const app = Fastify({
    logger: options.logger ?? false,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false } },
  });
  const codes = new WeakMap<FastifyRequest, string>();
  const refuse = (req: FastifyRequest, reply: FastifyReply, status: number, body: { code: string } & Record<string, unknown>) => {
    codes.set(req, body.code);
    return reply.code(status).send(body);
  };

  app.addHook('onRequest', async (_req, reply) => {
    reply.header('X-Sample-Upstream', 'writ');
  });
  // onSend, not onResponse: the record exists before the caller sees the answer.
  app.addHook('onSend', async (req, reply, payload) => {
    const route = req.routeOptions.url;
    if (route !== undefined && UNLOGGED_ROUTES.has(route)) return payload;
    store.recordRequest({
      method: req.method,
      url: req.url,
      post_id: (req.params as { id?: string } | undefined)?.id ?? null,
      status: reply.statusCode,
      code: codes.get(req) ?? null,
      principal: header(req, 'writ-principal'),
      fencing_epoch: header(req, 'writ-fencing-epoch'),
      if_match: header(req, 'if-match'),
      receipt_id: header(req, 'writ-receipt-id'),
    });
    return payload;
  });
  app.addHook('onClose', async () => {
    db.close();
  });
  app.setErrorHandler((err: { validation?: unknown; statusCode?: number; message: string }, req, reply) => {
    if (err.validation || err.statusCode === 400 || err.statusCode === 415) {
      return refuse(req, reply, 400, { code: 'MALFORMED_REQUEST', message: err.message });
    }
    req.log.error(err);
    return refuse(req, reply, 500, { code: 'INTERNAL', message: 'internal error' });
  });
  app.setNotFoundHandler((req, reply) => refuse(req, reply, 404, { code: 'NOT_FOUND', message: `no route ${req.method} ${req.url}` }));

  app.get('/healthz', async () => ({ ok: true, sample_upstream: true }));

  app.get<{ Params: { id: string } }>('/posts/:id', { schema: { params: { type: 'object', properties: { id: POST_ID } } } }, async (req, reply) => {
    const post = store.get(req.params.id);
    if (!post) return refuse(req, reply, 404, { code: 'NOT_FOUND', message: `no post '${req.params.id}'` });
    return reply.header('ETag', etag(post.revision)).send(view(post));
  });

  app.put<{ Params: { id: string }; Body: { fields: PostFields } }>(
    '/posts/:id',
    {
      schema: {
        params: { type: 'object', properties: { id: POST_ID } },
        body: {
          type: 'object',
          required: ['fields'],
          additionalProperties: false,
          properties: { fields: { type: 'object', additionalProperties: false, properties: FIELD_SCHEMAS } },
        },
      },
    },
    async (req, reply) => {
      const ifMatchHeader = header(req, 'if-match');
      if (ifMatchHeader === null) {
        return refuse(req, reply, 428, { code: 'PRECONDITION_REQUIRED', message: 'If-Match: "<revision>" is required (use "0" to create)' });
      }
      const ifMatch = parseEtag(ifMatchHeader);
      if (ifMatch === null) return refuse(req, reply, 400, { code: 'MALFORMED_REQUEST', message: `If-Match must be a strong ETag like "3", got ${ifMatchHeader}` });
      const writer = writerHeaders(req);
      if (!writer) return refuse(req, reply, 400, { code: 'MALFORMED_REQUEST', message: MALFORMED_FENCING });
      if (pastDeadline(req)) return refuse(req, reply, 409, { code: 'DEADLINE_PASSED', message: 'the write arrived after its Writ-Deadline; not applied' });
      return answer(req, reply, store.put({ postId: req.params.id, ifMatch, fields: req.body.fields, ...writer }));
    },
  );

  app.post<{ Params: { id: string }; Body: { tags: { add?: string[]; remove?: string[] } } }>(
    '/posts/:id/merge',
    {
      schema: {
        params: { type: 'object', properties: { id: POST_ID } },
        body: {
          type: 'object',
          required: ['tags'],
          additionalProperties: false,
          properties: {
            tags: {
              type: 'object',
              additionalProperties: false,
              properties: { add: { type: 'array', items: { type: 'string' } }, remove: { type: 'array', items: { type: 'string' } } },
            },
          },
        },
      },
    },
    async (req, reply) => {
      const writer = writerHeaders(req);
      if (!writer) return refuse(req, reply, 400, { code: 'MALFORMED_REQUEST', message: MALFORMED_FENCING });
      if (pastDeadline(req)) return refuse(req, reply, 409, { code: 'DEADLINE_PASSED', message: 'the write arrived after its Writ-Deadline; not applied' });
      const { add = [], remove = [] } = req.body.tags;
      return answer(req, reply, store.merge({ postId: req.params.id, addTags: add, removeTags: remove, ...writer }));
    },
  );

  app.get<{ Params: { id: string } }>('/posts/:id/history', { schema: { params: { type: 'object', properties: { id: POST_ID } } } }, async (req) => ({
    id: req.params.id,
    revisions: store.history(req.params.id),
  }));

  app.get<{ Params: { id: string; receiptId: string } }>(
    '/posts/:id/writes/:receiptId',
    { schema: { params: { type: 'object', properties: { id: POST_ID } } } },
    async (req) => {
      const revision = store.revisionOfReceipt(req.params.id, req.params.receiptId);
      return revision === null ? { applied: false } : { applied: true, revision };
    },
  );

  app.get('/writes', async () => {
    const per_post = store.writeCounts();
    return { total: Object.values(per_post).reduce((a, b) => a + b, 0), per_post };
  });

  app.get<{ Querystring: { post?: string; after?: string } }>('/requests', async (req) => ({
    requests: store.requests({ postId: req.query.post, after: req.query.after === undefined ? undefined : Number(req.query.after) }),
  }));

  function answer(req: FastifyRequest, reply: FastifyReply, outcome: WriteOutcome) {
    switch (outcome.kind) {
      case 'applied':
        return reply.code(outcome.created ? 201 : 200).header('ETag', etag(outcome.post.revision)).send(view(outcome.post));
      case 'replayed':
        return reply
          .header('ETag', etag(outcome.revision))
          .header('Writ-Replayed', 'true')
          .send({ ...view(outcome.post), revision: outcome.revision, current_revision: outcome.post.revision, replayed: true });
      case 'precondition_failed':
        reply.header('ETag', etag(outcome.currentRevision));
        return refuse(req, reply, 412, {
          code: 'PRECONDITION_FAILED',
          message:
            outcome.changedFields.length > 0
              ? `changed since the revision in If-Match: ${outcome.changedFields.join(', ')}`
              : `If-Match is ahead of the current revision ${outcome.currentRevision}`,
          current_revision: outcome.currentRevision,
          changed_fields: outcome.changedFields,
        });
      case 'stale_epoch':
        return refuse(req, reply, 409, {
          code: 'STALE_FENCING_EPOCH',
          message: `a write with a higher fencing epoch for ${outcome.key}, or for its resource or one of its fields, was already accepted`,
          key: outcome.key,
          highest: outcome.highest,
        });
    }
  }

  return app;
}

/** Listens (port 0 picks a free one) and returns the base URL. */
export async function startSampleUpstream(options: SampleUpstreamOptions & { port: number; host?: string }): Promise<{ app: FastifyInstance; url: string; port: number }> {
  const app = createSampleUpstream(options);
  const host = options.host ?? '127.0.0.1';
  await app.listen({ port: options.port, host });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  return { app, url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`, port };
}

function view(post: Post) {
  return {
    id: post.id,
    revision: post.revision,
    fields: post.fields,
    field_revisions: post.field_revisions,
    updated_by: post.updated_by,
    fences: post.fences,
    fencing_epoch: post.fencing_epoch,
    last_receipt: post.last_receipt,
  };
}

function etag(revision: number): string {
  return `"${revision}"`;
}

function parseEtag(value: string): number | null {
  const m = /^"(\d{1,15})"$/.exec(value.trim());
  return m ? Number(m[1]) : null;
}

function header(req: FastifyRequest, name: string): string | null {
  const v = req.headers[name];
  return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
}

const MALFORMED_FENCING = 'Writ-Fencing-Epoch must be a non-negative integer or comma-separated key=epoch pairs';

function writerHeaders(req: FastifyRequest): { fencing: FencingEpochs | null; fencingHeader: string | null; principal: string | null; receiptId: string | null } | null {
  const fencingHeader = header(req, 'writ-fencing-epoch');
  const fencing = fencingHeader === null ? null : parseFencingEpochs(fencingHeader);
  if (fencingHeader !== null && fencing === null) return null;
  return { fencing, fencingHeader, principal: header(req, 'writ-principal'), receiptId: header(req, 'writ-receipt-id') };
}
