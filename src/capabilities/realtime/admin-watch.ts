// The operator's watch of a table (RealtimeAdminService.WatchTable,
// admin-realtime-service.ts): a second TableFeed over the same change log
// and interest as the devices' (tables.ts), whose rules are "none" (the
// operator sees every row and every column, as in the SQL editor). Its
// subscriptions ride on WatchConnections, one per stream, which are not
// consumer connections (not counted against the application's caps). Both
// feeds keep the interest of a table through one shared, reference-counted
// interest: the table stays captured while either has a subscriber.
import { QueuedConnection } from "./connection.js";
import type { Interest } from "./interest.js";
import type { TableTopic } from "./protocol.js";
import { TableFeed, type TableFeedDeps } from "./tables.js";

/**
 * Views of one Interest for several feeds: a table's interest row is added
 * when the first view adds it and removed when no view holds it any more.
 * Each view holds a key at most once (add is idempotent per view).
 */
export function sharedInterest(base: Interest): { view(): Interest } {
  const holders = new Map<string, Set<object>>();
  const key = (appId: number, table: string) => `${appId}\u0000${table}`;
  return {
    view() {
      const me = {};
      return {
        add(appId, table) {
          const k = key(appId, table);
          let h = holders.get(k);
          if (!h) holders.set(k, (h = new Set()));
          h.add(me);
          return base.add(appId, table);
        },
        remove(appId, table) {
          const k = key(appId, table);
          const h = holders.get(k);
          if (!h?.delete(me)) return;
          if (h.size > 0) return;
          holders.delete(k);
          base.remove(appId, table);
        },
        watched: (q, onlyApp) => base.watched(q, onlyApp),
        // the module starts and stops the base itself
        start() {},
        stop: () => Promise.resolve(),
      };
    },
  };
}

/** One WatchTable stream: the changes TableFeed writes, queued as JSON text, bounded like a device's stream. */
export class WatchConnection extends QueuedConnection {
  constructor(appId: number, maxBuffered: number) {
    // not a consumer: consumer id 0, never authenticated again
    super("stream", { consumerId: 0, appId, appKey: "", userId: "", deviceId: "" }, "", maxBuffered);
  }

  // (a watch that can no longer be written to is over)
  override beat(): boolean {
    return this.send("heartbeat", '{"type":"heartbeat"}');
  }
}

/** The operators' table watches of this process. */
export class OperatorWatch {
  readonly feed: TableFeed;
  private readonly conns = new Set<WatchConnection>();

  constructor(deps: Omit<TableFeedDeps, "access">, private readonly maxBuffered: number) {
    this.feed = new TableFeed({ ...deps, access: () => Promise.resolve(undefined) });
  }

  start(): void {
    this.feed.start();
  }

  /** Ends every watch (server shutdown). */
  stop(): void {
    for (const c of [...this.conns]) c.close(1001, "shutdown");
    this.feed.stop();
  }

  /** Opens a watch of the table (errors as a device's subscribe: not_found, ...); `subscribed` is its first message. */
  async open(appId: number, table: string): Promise<WatchConnection> {
    const conn = new WatchConnection(appId, this.maxBuffered);
    this.conns.add(conn);
    conn.onEnd = () => {
      this.conns.delete(conn);
      for (const sub of conn.subs.values()) this.feed.unsubscribe(sub as never);
      conn.subs.clear();
    };
    const topic: TableTopic = { kind: "table", table };
    try {
      await this.feed.subscribe(conn, "watch", topic, undefined, () => true);
    } catch (err) {
      conn.gone();
      throw err;
    }
    return conn;
  }
}
