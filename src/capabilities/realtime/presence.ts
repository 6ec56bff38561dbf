// The presence of one channel as this process knows it: every member of
// every server, each owned by the server its connection is on. A server
// repeats its members on the channel every presence heartbeat; the members
// of a server not heard for `missed` heartbeats are dropped (its process
// died), so a member of a killed server leaves within missed x interval.
import type { Member } from "./protocol.js";

export interface PresenceDiff {
  joins: Member[];
  leaves: Member[];
}

const sameState = (a: Member, b: Member) => a.consumer_id === b.consumer_id && JSON.stringify(a.state) === JSON.stringify(b.state);

export class ChannelPresence {
  /** member id -> the member and its server */
  private readonly members = new Map<string, { m: Member; server: string }>();
  /** server -> when it was last heard on this channel (ms) */
  private readonly heard = new Map<string, number>();

  constructor(private readonly self: string) {}

  get size(): number {
    return this.members.size;
  }

  list(): Member[] {
    return [...this.members.values()].map((x) => x.m);
  }

  /** Members of one server. */
  of(server: string): Member[] {
    return [...this.members.values()].filter((x) => x.server === server).map((x) => x.m);
  }

  has(member: string): boolean {
    return this.members.has(member);
  }

  /** A join or a state update; undefined when nothing changed. */
  join(server: string, m: Member, now: number): PresenceDiff | undefined {
    if (server !== this.self) this.heard.set(server, now);
    const had = this.members.get(m.member);
    if (had && sameState(had.m, m)) return undefined;
    this.members.set(m.member, { m, server });
    return { joins: [m], leaves: [] };
  }

  leave(member: string): PresenceDiff | undefined {
    const had = this.members.get(member);
    if (!had) return undefined;
    this.members.delete(member);
    return { joins: [], leaves: [had.m] };
  }

  /** A server's full list: joins what is new or changed, leaves what it no longer lists. */
  heartbeat(server: string, list: Member[], now: number): PresenceDiff | undefined {
    this.heard.set(server, now);
    const diff: PresenceDiff = { joins: [], leaves: [] };
    const listed = new Set<string>();
    for (const m of list) {
      listed.add(m.member);
      const d = this.join(server, m, now);
      if (d) diff.joins.push(...d.joins);
    }
    for (const [id, x] of this.members) {
      if (x.server === server && !listed.has(id)) {
        this.members.delete(id);
        diff.leaves.push(x.m);
      }
    }
    return diff.joins.length || diff.leaves.length ? diff : undefined;
  }

  /** A server is gone (it said so, or it was not heard since `before`): its members leave. */
  dropServer(server: string): PresenceDiff | undefined {
    this.heard.delete(server);
    const leaves: Member[] = [];
    for (const [id, x] of this.members) {
      if (x.server === server) {
        this.members.delete(id);
        leaves.push(x.m);
      }
    }
    return leaves.length ? { joins: [], leaves } : undefined;
  }

  /** Drops the members of every other server last heard before `before`. */
  expire(before: number): PresenceDiff | undefined {
    const leaves: Member[] = [];
    for (const [server, at] of this.heard) {
      if (at < before) leaves.push(...(this.dropServer(server)?.leaves ?? []));
    }
    return leaves.length ? { joins: [], leaves } : undefined;
  }
}
