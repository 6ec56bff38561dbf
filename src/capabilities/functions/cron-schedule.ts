// Cron expressions of schedule triggers (croner): 5 fields (minutes) or 6
// (leading seconds), read in an IANA time zone (Intl), so "0 9 * * *" in
// Europe/Berlin is 09:00 Berlin time across daylight-saving changes.
import { Cron } from "croner";

export interface ParsedSchedule {
  /** The next tick strictly after `after`; null when the expression never fires again. */
  next(after: Date): Date | null;
  /** The last tick strictly before `before`; null when there is none. */
  previous(before: Date): Date | null;
}

const cache = new Map<string, ParsedSchedule>();
const CACHE_MAX = 1000;

/** Whether `tz` is an IANA time zone this runtime knows. */
export function validTimezone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** Parses (cached); throws an Error naming what is wrong. */
export function parseSchedule(cron: string, timezone: string): ParsedSchedule {
  const key = `${cron}\u0000${timezone}`;
  let s = cache.get(key);
  if (s) return s;
  const fields = cron.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) throw new Error("A cron expression has 5 fields (minute hour day month weekday) or 6 (with leading seconds).");
  if (!validTimezone(timezone)) throw new Error(`Unknown time zone ${JSON.stringify(timezone)} (an IANA name such as Europe/Berlin).`);
  const c = new Cron(cron, { timezone, paused: true });
  s = { next: (after) => c.nextRun(after), previous: (before) => c.previousRuns(1, before)[0] ?? null };
  if (cache.size >= CACHE_MAX) cache.clear();
  cache.set(key, s);
  return s;
}
