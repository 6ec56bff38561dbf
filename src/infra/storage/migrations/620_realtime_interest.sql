-- Realtime table subscriptions (docs/realtime.md, "Table changes"): which
-- tables of which application have a subscriber on some server. Each server
-- refreshes its rows while it has subscribers; the change-capture drainer
-- captures the tables of the rows that have not expired, beside those the
-- functions' event triggers watch. A server that dies leaves rows that
-- expire on their own.
CREATE TABLE realtime_interest (
  app_id bigint NOT NULL,
  tbl text NOT NULL,
  server_id text NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (app_id, tbl, server_id)
);
CREATE INDEX realtime_interest_expires_idx ON realtime_interest (expires_at);
