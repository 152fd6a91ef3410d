import pg from 'pg';
import { GRAPH_CHANNEL } from './graph-event-store.js';

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
  const reconnectMs = options.reconnectMs ?? 500;
  let closed = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: url, application_name: 'writ graph listener' });
    c.on('notification', (n) => {
      if (n.channel === GRAPH_CHANNEL && n.payload !== undefined) onHead(Number(n.payload));
    });
    c.on('error', (e) => lost(c, e));
    c.on('end', () => lost(c, new Error('the graph listener connection ended')));
    await c.connect();
    await c.query(`LISTEN ${GRAPH_CHANNEL}`);
    const { rows } = await c.query<{ revision: string }>('SELECT revision FROM graph_head');
    client = c;
    onHead(Number(rows[0]!.revision));
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
