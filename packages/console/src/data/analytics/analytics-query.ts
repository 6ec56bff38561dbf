// Analytics calls of the console: the chosen range (days, in the URL as
// from/to) and the reads that honour it.
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { api } from "../../api";

export const day = (d: Date) => d.toISOString().slice(0, 10);
const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;

/** The default range: the last 14 days, today included. */
export function defaultRange(): { from: string; to: string } {
  return { from: day(new Date(Date.now() - 13 * 86400_000)), to: day(new Date()) };
}

/** A range from the URL's from/to (YYYY-MM-DD, UTC days, both included); bad values fall back to the default. */
export function rangeOf(from: string | null, to: string | null): { from: string; to: string } {
  const d = defaultRange();
  const f = from && DAY_RE.test(from) ? from : d.from;
  const t = to && DAY_RE.test(to) ? to : d.to;
  return f <= t ? { from: f, to: t } : { from: t, to: f };
}

/** [from 00:00 UTC, the day after to 00:00 UTC) as timestamps. */
export function rangeTimestamps(r: { from: string; to: string }) {
  return {
    from: timestampFromDate(new Date(r.from + "T00:00:00Z")),
    to: timestampFromDate(new Date(new Date(r.to + "T00:00:00Z").getTime() + 86400_000)),
  };
}

export const eventDailyCounts = (eventId: bigint, r: { from: string; to: string }) => api.analytics.getEventDailyCounts({ eventId, ...rangeTimestamps(r) });

/** The metadata breakdown over the range (the event's own counts are all-time). */
export const eventBreakdown = (eventId: bigint, r: { from: string; to: string }) => api.analytics.getEventBreakdown({ eventId, ...rangeTimestamps(r) });

/** Lists show the records active in the range. */
export const listEvents = (appId: bigint, r: { from: string; to: string }) => api.analytics.listEvents({ filter: { appId, pageSize: 200, ...rangeTimestamps(r) } });
export const listLogs = (appId: bigint, type: string, r: { from: string; to: string }) => api.analytics.listLogs({ filter: { appId, pageSize: 200, ...rangeTimestamps(r) }, type });
export const listBreadcrumbs = (appId: bigint, r: { from: string; to: string }) => api.analytics.listBreadcrumbs({ filter: { appId, pageSize: 200, ...rangeTimestamps(r) } });
