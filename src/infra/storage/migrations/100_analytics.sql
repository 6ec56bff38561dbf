-- Analytics: events, logs, breadcrumbs (aggregates plus every raw occurrence),
-- the processed-batch record (exactly-once batches) and the embedded queue.

CREATE TABLE analytics_events (
  id bigserial PRIMARY KEY,
  app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  name text NOT NULL,
  occurrences bigint NOT NULL DEFAULT 0,
  unique_users bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (app_id, name)
);
CREATE INDEX analytics_events_app_updated_idx ON analytics_events (app_id, updated_at DESC, id DESC);

-- Distinct users per event: a new row here is a new unique user.
CREATE TABLE analytics_event_users (
  event_id bigint NOT NULL REFERENCES analytics_events(id) ON DELETE CASCADE,
  user_id text NOT NULL,
  PRIMARY KEY (event_id, user_id)
);

CREATE TABLE analytics_event_data (
  id bigserial PRIMARY KEY,
  event_id bigint NOT NULL REFERENCES analytics_events(id) ON DELETE CASCADE,
  key text NOT NULL,
  value text NOT NULL,
  occurrences bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (event_id, key, value)
);

CREATE TABLE analytics_event_occurrences (
  id bigserial PRIMARY KEY,
  event_id bigint NOT NULL REFERENCES analytics_events(id) ON DELETE CASCADE,
  consumer_id bigint NOT NULL,
  session_id bigint,
  user_id text NOT NULL,
  metadata jsonb NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX analytics_event_occ_event_idx ON analytics_event_occurrences (event_id, created_at);

CREATE TABLE analytics_logs (
  id bigserial PRIMARY KEY,
  app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  hash text NOT NULL,
  app_versions text NOT NULL,
  class_fqn text NOT NULL,
  message text NOT NULL,
  type text NOT NULL CHECK (type IN ('error', 'crash')),
  context jsonb,
  file_name text,
  line_number bigint,
  stack_trace text,
  occurrences bigint NOT NULL DEFAULT 0,
  users_affected bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  last_seen_at timestamptz NOT NULL,
  UNIQUE (app_id, hash)
);
CREATE INDEX analytics_logs_app_seen_idx ON analytics_logs (app_id, last_seen_at DESC, id DESC);

CREATE TABLE analytics_log_users (
  log_id bigint NOT NULL REFERENCES analytics_logs(id) ON DELETE CASCADE,
  user_id text NOT NULL,
  PRIMARY KEY (log_id, user_id)
);

CREATE TABLE analytics_log_occurrences (
  id bigserial PRIMARY KEY,
  log_id bigint NOT NULL REFERENCES analytics_logs(id) ON DELETE CASCADE,
  consumer_id bigint NOT NULL,
  session_id bigint,
  user_id text NOT NULL,
  app_version text NOT NULL,
  stack_trace text,
  file_name text,
  line_number bigint,
  context jsonb,
  -- Blob store key and description of an attached file.
  attachment_key text,
  attachment_name text,
  attachment_type text,
  attachment_size bigint,
  created_at timestamptz NOT NULL
);
CREATE INDEX analytics_log_occ_log_idx ON analytics_log_occurrences (log_id, created_at);

CREATE TABLE analytics_breadcrumbs (
  id bigserial PRIMARY KEY,
  app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  name text NOT NULL,
  occurrences bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  last_seen_at timestamptz NOT NULL,
  UNIQUE (app_id, name)
);
CREATE INDEX analytics_breadcrumbs_app_seen_idx ON analytics_breadcrumbs (app_id, last_seen_at DESC, id DESC);

CREATE TABLE analytics_breadcrumb_occurrences (
  id bigserial PRIMARY KEY,
  breadcrumb_id bigint NOT NULL REFERENCES analytics_breadcrumbs(id) ON DELETE CASCADE,
  consumer_id bigint NOT NULL,
  session_id bigint,
  created_at timestamptz NOT NULL
);
CREATE INDEX analytics_bc_occ_bc_idx ON analytics_breadcrumb_occurrences (breadcrumb_id, created_at);

-- A batch applied by a worker; inserted in the same transaction as its
-- effects, so a redelivered batch is recognised and skipped.
CREATE TABLE analytics_processed_batches (
  batch_id text PRIMARY KEY,
  kind text NOT NULL,
  item_count int NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX analytics_processed_batches_at_idx ON analytics_processed_batches (processed_at);

-- The embedded queue (used when no NATS_URL is configured).
CREATE TABLE analytics_queue (
  id bigserial PRIMARY KEY,
  msg_id text NOT NULL UNIQUE,
  payload bytea NOT NULL,
  -- ready | dead
  status text NOT NULL DEFAULT 'ready',
  attempts int NOT NULL DEFAULT 0,
  visible_at timestamptz NOT NULL DEFAULT now(),
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  dead_at timestamptz
);
CREATE INDEX analytics_queue_ready_idx ON analytics_queue (visible_at, id) WHERE status = 'ready';
