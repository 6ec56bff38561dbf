// The last broadcasts of a channel as this server saw them, for the
// operator's channel inspector (admin-realtime-service.ts, docs/realtime.md
// "For operators"). A fixed ring of RECENT_PER_CHANNEL entries per channel
// with a subscriber on this server, dropped with the channel: at most
// RECENT_PER_CHANNEL x channelsPerApp entries per application, each its
// payload (at most the message limit, 64 KiB by default) and a few dozen
// bytes. Payloads are the references the delivery already holds (nothing
// is copied); a ring of small messages costs a few KiB.
export const RECENT_PER_CHANNEL = 50;

export interface RecentMessage {
  event: string;
  payload: unknown;
  from: number;
  /** When this server received it (ms since the epoch). */
  at: number;
}

export class RecentRing {
  private readonly items: Array<RecentMessage | undefined>;
  private next = 0;
  private count = 0;

  constructor(readonly capacity = RECENT_PER_CHANNEL) {
    this.items = new Array<RecentMessage | undefined>(capacity);
  }

  get size(): number {
    return this.count;
  }

  push(m: RecentMessage): void {
    this.items[this.next] = m;
    this.next = (this.next + 1) % this.capacity;
    if (this.count < this.capacity) this.count++;
  }

  /** Newest first. */
  list(): RecentMessage[] {
    const out: RecentMessage[] = [];
    for (let i = 1; i <= this.count; i++) out.push(this.items[(this.next - i + this.capacity) % this.capacity]!);
    return out;
  }
}
