-- Access rules of an application's linked database (docs/database.md,
-- "Access rules"): every save is a new version; the newest is in force.
CREATE TABLE app_access_rules (
  app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  version integer NOT NULL CHECK (version > 0),
  mode text NOT NULL CHECK (mode IN ('open', 'rules')),
  -- { "<table>": { "select": "...", "insert": "...", "update": "...", "updateCheck": "...",
  --                "delete": "...", "updateColumns": [...], "selectColumns": [...] } }
  tables jsonb NOT NULL DEFAULT '{}',
  saved_by bigint,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (app_id, version)
);
