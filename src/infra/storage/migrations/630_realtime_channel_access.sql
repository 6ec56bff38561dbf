-- Who may use an application's broadcast channels (docs/realtime.md,
-- "Channel access"): the operator's ordered entries, one row per
-- application; no row: every channel is open to every consumer ("any").
-- entries: [{ "pattern": "room:*", "mode": "any" | "none" | "rule", "rule": "..." }]
CREATE TABLE realtime_channel_access (
  app_id bigint PRIMARY KEY REFERENCES apps(id) ON DELETE CASCADE,
  entries jsonb NOT NULL DEFAULT '[]',
  updated_at timestamptz NOT NULL DEFAULT now()
);
