// Channels: the application's broadcast channels as the server answering
// knows them (RealtimeAdminService: channels with a subscriber on that
// server), who is present with their state, and the channel's recent
// broadcasts (the newest 50 the server saw). Both refresh every
// REFRESH_MS; the open channel is in the URL (?channel=NAME).
import { useEffect } from "react";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { App } from "../../../../gen/pulsebase/admin/v1/identity_pb.js";
import { inspectChannel, listChannels } from "../data/realtime/realtime-query";
import { useRouter, withQuery } from "../router";
import { NeedApp } from "../shell";
import { Async, fmtTime, Table, useAsync } from "../ui";
import "../components/database/live.css";

const REFRESH_MS = 2000;

/** Reloads the state every REFRESH_MS while the page is visible. */
function useRefresh(reload: () => void): void {
  useEffect(() => {
    const t = setInterval(() => {
      if (document.visibilityState === "visible") reload();
    }, REFRESH_MS);
    return () => clearInterval(t);
  }, [reload]);
}

export function ChannelsPage() {
  return (
    <div className="page">
      <h1>Channels</h1>
      <p className="muted">
        Broadcast channels of the application with a subscriber on this server, their presence and recent messages. Refreshed every {REFRESH_MS / 1000} s.
      </p>
      <NeedApp>{(app) => <Channels key={String(app.id)} app={app} />}</NeedApp>
    </div>
  );
}

function Channels({ app }: { app: App }) {
  const { loc, go } = useRouter();
  const open = loc.query.get("channel") ?? "";
  const list = useAsync(() => listChannels(app.id), [app.id]);
  useRefresh(list.reload);
  return (
    <>
      <section className="card">
        <Async state={list} isEmpty={(d) => d.channels.length === 0} empty="No channel has a subscriber on this server now. Channels appear here while a device follows them.">
          {(d) => (
            <Table
              label="Channels"
              rows={d.channels}
              rowKey={(c) => c.channel}
              selected={(c) => c.channel === open}
              onOpen={(c) => go(withQuery(loc, { channel: c.channel === open ? undefined : c.channel }))}
              columns={[
                { label: "Channel", cell: (c) => c.channel },
                { label: "Subscribers here", cell: (c) => String(c.subscribers), className: "num" },
                { label: "Present", cell: (c) => String(c.presenceMembers), className: "num" },
                { label: "Recent messages", cell: (c) => String(c.recentMessages), className: "num" },
                { label: "Last message", cell: (c) => fmtTime(c.lastMessageAt) },
              ]}
            />
          )}
        </Async>
      </section>
      {open && <Inspector key={open} app={app} channel={open} />}
    </>
  );
}

function Inspector({ app, channel }: { app: App; channel: string }) {
  const ch = useAsync(() => inspectChannel(app.id, channel), [app.id, channel]);
  useRefresh(ch.reload);
  return (
    <section className="card" aria-label={`Channel ${channel}`}>
      <h2>{channel}</h2>
      <Async state={ch}>
        {(d) => (
          <>
            {d.subscribers === 0 && <p className="muted">This server has no subscriber of the channel now: it knows nothing of its presence or messages.</p>}
            <h3>Present ({d.members.length})</h3>
            {d.members.length === 0 ? (
              <div className="empty">Nobody is present.</div>
            ) : (
              <Table
                label="Presence"
                rows={d.members}
                rowKey={(m) => m.member}
                columns={[
                  { label: "Consumer", cell: (m) => `#${String(m.consumerId)}`, className: "num" },
                  { label: "State", cell: (m) => <code className="json-inline">{JSON.stringify(m.state ?? {})}</code> },
                  { label: "Server", cell: (m) => (m.onThisServer ? "this one" : "another") },
                  { label: "Member", cell: (m) => <code>{m.member.slice(0, 8)}</code> },
                ]}
              />
            )}
            <h3>Recent messages ({d.recent.length} of the last {d.recentCapacity})</h3>
            {d.recent.length === 0 ? (
              <div className="empty">No broadcast seen yet.</div>
            ) : (
              <Table
                label="Recent messages"
                rows={d.recent.map((r, i) => ({ r, i }))}
                rowKey={({ i }) => String(i)}
                columns={[
                  { label: "When", cell: ({ r }) => fmtTime(r.at) },
                  { label: "Event", cell: ({ r }) => r.event },
                  { label: "From", cell: ({ r }) => `#${String(r.from)}`, className: "num" },
                  { label: "Payload", cell: ({ r }) => <code className="json-inline">{JSON.stringify(r.payload ? toJson(ValueSchema, r.payload) : null)}</code> },
                ]}
              />
            )}
          </>
        )}
      </Async>
    </section>
  );
}
