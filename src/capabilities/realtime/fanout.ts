// How a channel's broadcasts and presence reach the other server processes.
// With NATS (NATS_URL): core pub/sub, one subject per channel of an
// application, `<namespace>.rt.<appId>.<base64url(channel)>`, subscribed
// while this process has a subscriber of the channel; messages are
// fire-and-forget (a broadcast is not stored: a server that is disconnected
// misses it; presence is repaired by the next heartbeat). Without NATS
// (the embedded default, one process) nothing leaves the process: the hub
// delivers locally.
import type { Subscription } from "@nats-io/transport-node";
import type { NatsLink } from "../../infra/nats/nats-link.js";
import type { Member } from "./protocol.js";

/** What servers tell each other about a channel (o: the sending server). */
export type FanoutMessage =
  | { o: string; k: "b"; e: string; p: unknown; f: number }
  | { o: string; k: "j"; m: Member }
  | { o: string; k: "l"; m: string }
  /** heartbeat: the sender's full member list of the channel */
  | { o: string; k: "h"; ms: Member[] }
  /** query: a server that just subscribed asks the others for their heartbeat now */
  | { o: string; k: "q" }
  /** the sender stops: drop its members */
  | { o: string; k: "x" };

export interface Fanout {
  /** Receives the channel's messages of the other servers until the returned function is called. */
  join(appId: number, channel: string, fn: (msg: FanoutMessage) => void): () => void;
  publish(appId: number, channel: string, msg: FanoutMessage): void;
  readonly shared: boolean;
}

export const localFanout: Fanout = { join: () => () => {}, publish: () => {}, shared: false };

export function natsFanout(nats: NatsLink, namespace: string, onError: (err: unknown) => void): Fanout {
  const subject = (appId: number, channel: string) => `${namespace}.rt.${appId}.${Buffer.from(channel).toString("base64url")}`;
  return {
    shared: true,
    join(appId, channel, fn) {
      let sub: Subscription | undefined;
      let left = false;
      const open = (nc: NonNullable<NatsLink["current"]>) => {
        if (left) return;
        sub = nc.subscribe(subject(appId, channel), {
          callback: (err, msg) => {
            if (err) return onError(err);
            try {
              fn(msg.json<FanoutMessage>());
            } catch (e) {
              onError(e);
            }
          },
        });
      };
      const nc = nats.current;
      if (nc) open(nc);
      else void nats.connection().then(open, () => {});
      return () => {
        left = true;
        sub?.unsubscribe();
      };
    },
    publish(appId, channel, msg) {
      const nc = nats.current;
      // Not buffered while disconnected: a broadcast is ephemeral, presence heals by heartbeat.
      if (!nc || !nats.connected) return;
      try {
        nc.publish(subject(appId, channel), JSON.stringify(msg));
      } catch (err) {
        onError(err);
      }
    },
  };
}
