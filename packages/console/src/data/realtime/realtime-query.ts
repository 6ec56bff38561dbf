// The realtime views' calls (RealtimeAdminService, docs/realtime.md "For
// operators"): the Live tab's watch of a table's changes (a server stream
// over Connect, reopened after a drop: changes committed while it was
// closed are not replayed, the view says so), and the Channels page's
// channels and their inspection.
import { Code, ConnectError } from "@connectrpc/connect";
import type { ChannelInspection, ListChannelsResponse, TableChange } from "../../../../../gen/pulsebase/admin/v1/realtime_pb.js";
import { api } from "../../api";

/** Changes kept in the Live view: older ones drop off the end. */
export const LIVE_KEPT = 200;

export type WatchState = "connecting" | "live" | "reconnecting" | "stopped";

/**
 * Watches the table's changes (WatchTable) until the returned function is
 * called. `state("live")` once the server has started the watch (a change
 * committed after it is shown); a dropped stream is opened again with a
 * backoff, `state("reconnecting", error)` meanwhile; a refusal that will not
 * change (no such table, no rights) ends it: `state("stopped", error)`.
 */
export function watchTable(appId: bigint, table: string, on: { change(c: TableChange): void; state(s: WatchState, error?: unknown): void }): () => void {
  const abort = new AbortController();
  void (async () => {
    let failures = 0;
    while (!abort.signal.aborted) {
      try {
        on.state(failures ? "reconnecting" : "connecting");
        const stream = api.realtime.watchTable({ appId, table }, { signal: abort.signal, timeoutMs: 2_147_483_647 });
        for await (const e of stream) {
          if (e.kind.case === "started") {
            failures = 0;
            on.state("live");
          } else if (e.kind.case === "change") on.change(e.kind.value);
        }
      } catch (e) {
        if (abort.signal.aborted) return;
        const err = ConnectError.from(e);
        if ([Code.NotFound, Code.PermissionDenied, Code.Unauthenticated, Code.InvalidArgument, Code.FailedPrecondition].includes(err.code)) {
          on.state("stopped", err);
          return;
        }
        on.state("reconnecting", err);
      }
      if (abort.signal.aborted) return;
      failures++;
      await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** Math.min(failures, 4), 8000)));
    }
  })();
  return () => abort.abort();
}

export function listChannels(appId: bigint): Promise<ListChannelsResponse> {
  return api.realtime.listChannels({ appId });
}

export function inspectChannel(appId: bigint, channel: string): Promise<ChannelInspection> {
  return api.realtime.inspectChannel({ appId, channel });
}
