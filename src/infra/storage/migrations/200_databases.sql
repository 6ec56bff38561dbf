-- Linked libSQL databases: owned by a team, linked by at most one per
-- application (several applications of the same team may share one).
CREATE TABLE databases (
  id bigserial PRIMARY KEY,
  team_id bigint NOT NULL REFERENCES teams(id),
  name text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('embedded', 'remote')),
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'provisioning', 'active', 'suspended', 'deleting', 'deleted')),
  status_message text NOT NULL DEFAULT '',
  -- embedded: file name relative to the data directory
  file_path text,
  -- remote: libSQL server URL and auth token
  url text,
  auth_token text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'embedded') = (url IS NULL))
);
CREATE INDEX databases_team_idx ON databases (team_id, id);

-- app_id is the primary key: an application links at most one database.
CREATE TABLE app_databases (
  app_id bigint PRIMARY KEY REFERENCES apps(id) ON DELETE CASCADE,
  database_id bigint NOT NULL REFERENCES databases(id),
  linked_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX app_databases_database_idx ON app_databases (database_id);
