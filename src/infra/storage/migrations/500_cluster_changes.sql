-- The change bus's PostgreSQL side (src/infra/cluster/change-bus.ts): one row per
-- application and kind of change, its version bumped by every change. Every
-- server reads the rows changed since its last read, a few times a second,
-- so a change reaches every server even when NATS (the fast path) is down or
-- a message was lost.
CREATE TABLE cluster_changes (
  app_id bigint NOT NULL,
  kind text NOT NULL,
  version bigint NOT NULL,
  changed_at timestamptz NOT NULL,
  PRIMARY KEY (app_id, kind)
);
CREATE INDEX cluster_changes_changed_at ON cluster_changes (changed_at);
