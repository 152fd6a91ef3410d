import pg from 'pg';
import { GRAPH_CHANNEL } from './graph-event-store.js';
import { LEASE_CHANNEL } from './lease-repository.js';

export interface GraphHeadListener {
  close(): Promise<void>;
}

export interface GraphHeadListenerOptions {
  /** Wait before reconnecting after the connection is lost (default 500 ms). */
  reconnectMs?: number;
  /** Told about each lost connection (the listener reconnects by itself). */
  onError?: (e: unknown) => void;
}

/**
 * Calls `onHead` with the graph's new head revision whenever any replica commits a graph append (the
 * append NOTIFYs `writ_graph`, delivered at commit). One dedicated connection per replica, outside the
 * pool. Notifications sent while it was disconnected are lost, so after every (re)connect it also
 * reports the current head: the caller folds events up to whatever head it is told, so a head it has
 * already seen is harmless.
 */
export async function listenForGraphHeads(url: string, onHead: (head: number) => void, options: GraphHeadListenerOptions = {}): Promise<GraphHeadListener> {
  return listen(url, 'writ graph listener', GRAPH_CHANNEL, (payload) => onHead(Number(payload)), async (c) => {
    const { rows } = await c.query<{ revision: string }>('SELECT revision FROM graph_head');
    onHead(Number(rows[0]!.revision));
  }, options);
}

/**
 * Calls `onRelease` whenever a lease is released on any replica (the release NOTIFYs `writ_lease`, at
 * commit), and after every (re)connect (a release may have been missed): waiters try again at once.
 */
export function listenForLeaseReleases(url: string, onRelease: () => void, options: GraphHeadListenerOptions = {}): Promise<GraphHeadListener> {
  return listen(url, 'writ lease listener', LEASE_CHANNEL, () => onRelease(), async () => onRelease(), options);
}

/** One dedicated connection LISTENing on `channel`, outside the pool, reconnecting by itself. */
async function listen(
  url: string,
  name: string,
  channel: string,
  onPayload: (payload: string) => void,
  onConnect: (c: pg.Client) => Promise<void>,
  options: GraphHeadListenerOptions,
): Promise<GraphHeadListener> {
  const reconnectMs = options.reconnectMs ?? 500;
  let closed = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: url, application_name: name });
    c.on('notification', (n) => {
      if (n.channel === channel) onPayload(n.payload ?? '');
    });
    c.on('error', (e) => lost(c, e));
    c.on('end', () => lost(c, new Error(`the ${name} connection ended`)));
    await c.connect();
    await c.query(`LISTEN ${channel}`);
    client = c;
    await onConnect(c);
  };

  const lost = (c: pg.Client, e: unknown) => {
    if (closed || client !== c) return;
    client = undefined;
    options.onError?.(e);
    c.end().catch(() => undefined);
    schedule();
  };

  const schedule = () => {
    if (closed || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      connect().catch((e) => {
        options.onError?.(e);
        schedule();
      });
    }, reconnectMs);
  };

  await connect();
  return {
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      await client?.end().catch(() => undefined);
    },
  };
}
