// Strict ISO 8601 date-time parsing for timestamps the spec types as strings.
// Accepted: YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS[.fff]] with optional Z, ±HH,
// ±HHMM or ±HH:MM (a space may replace T, a comma the decimal point).
// Without an offset the time is taken as UTC.
const RE = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

export function parseIsoTime(s: string): Date | undefined {
  const m = RE.exec(s.trim());
  if (!m) return undefined;
  const [, y, mo, d, h = "00", mi = "00", sec = "00", frac = "", off] = m;
  const month = Number(mo), day = Number(d), hour = Number(h), min = Number(mi), second = Number(sec);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || second > 59) return undefined;
  let offset = "Z";
  if (off && off.toUpperCase() !== "Z") offset = off.length === 3 ? `${off}:00` : off.length === 5 ? `${off.slice(0, 3)}:${off.slice(3)}` : off;
  const ms = frac ? `.${frac.slice(0, 3).padEnd(3, "0")}` : "";
  const date = new Date(`${y}-${mo}-${d}T${h}:${mi}:${sec}${ms}${offset}`);
  if (Number.isNaN(date.getTime())) return undefined;
  // Reject impossible days (2026-02-31) that Date would roll over, whatever
  // the offset.
  const calendar = new Date(0);
  calendar.setUTCFullYear(Number(y), month - 1, day);
  if (calendar.getUTCDate() !== day) return undefined;
  // PostgreSQL has no year 0 (ISO 0000 is 1 BC): such a time would fail at
  // the insert (a 500), so it is refused here like any other invalid time.
  if (date.getUTCFullYear() < 1) return undefined;
  return date;
}
