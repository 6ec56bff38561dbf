// The realtime gateway's limits and timing (docs/realtime.md, "Limits";
// PULSEBASE_REALTIME_*), and the rate limiters of broadcasts.
import { localLimiter, type LocalLimiter } from "../../infra/rate-limit/local-limiter.js";

export interface RealtimeLimits {
  connectionsPerApp: number;
  subscriptionsPerConnection: number;
  channelsPerApp: number;
  presencePerChannel: number;
  messageBytes: number;
  broadcastsPerSecond: number;
  appBroadcastsPerSecond: number;
  sendBufferBytes: number;
  heartbeatMs: number;
  presenceHeartbeatMs: number;
  presenceMissed: number;
  /** Table changes are kept this long for resumes (PULSEBASE_REALTIME_RESUME_WINDOW). */
  resumeWindowMs: number;
}

/** A WebSocket frame beyond this many message limits closes the connection (1009) instead of being answered. */
export const HARD_FRAME_FACTOR = 4;

/** Broadcasts of one consumer and of one application, per second, per process (the project's in-memory limiter). */
export class BroadcastLimiter {
  private readonly consumer: LocalLimiter;
  private readonly app: LocalLimiter;

  constructor(limits: Pick<RealtimeLimits, "broadcastsPerSecond" | "appBroadcastsPerSecond">) {
    this.consumer = localLimiter(limits.broadcastsPerSecond, 1000);
    this.app = localLimiter(limits.appBroadcastsPerSecond, 1000);
  }

  /** Undefined when allowed, else the seconds to wait. */
  async take(appId: number, consumerId: number): Promise<number | undefined> {
    const c = await this.consumer.take(`${appId}:${consumerId}`);
    if (!c.allowed) return c.retryAfterSeconds;
    const a = await this.app.take(String(appId));
    return a.allowed ? undefined : a.retryAfterSeconds;
  }
}
