-- The SQL editor's history and saved queries, per console account and
-- application (console-data, issue #30). Bounded in the store: the last 100
-- history entries and 200 saved queries per account.
CREATE TABLE sql_history (
  id bigserial PRIMARY KEY,
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  sql text NOT NULL,
  duration_ms integer NOT NULL DEFAULT 0,
  error text NOT NULL DEFAULT '',
  ran_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sql_history_user_idx ON sql_history (user_id, id DESC);

CREATE TABLE sql_saved_queries (
  id bigserial PRIMARY KEY,
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  name text NOT NULL,
  sql text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (user_id, app_id, name)
);
