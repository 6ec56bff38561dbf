-- Functions: code versions, settings, secrets, triggers, invocations and the
-- shared rate-limit buckets.
CREATE TABLE functions (
  id bigserial PRIMARY KEY,
  app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  name text NOT NULL,
  timeout_ms integer NOT NULL,
  memory_mb integer NOT NULL,
  -- Per-function invocation limit; 0 = only the application's plan limit.
  invocations_per_minute integer NOT NULL DEFAULT 0,
  active_version integer,
  next_version integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (app_id, name)
);

CREATE TABLE function_versions (
  id bigserial PRIMARY KEY,
  function_id bigint NOT NULL REFERENCES functions(id) ON DELETE CASCADE,
  version integer NOT NULL,
  code text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (function_id, version)
);

CREATE TABLE function_secrets (
  function_id bigint NOT NULL REFERENCES functions(id) ON DELETE CASCADE,
  name text NOT NULL,
  value text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (function_id, name)
);

CREATE TABLE function_triggers (
  id bigserial PRIMARY KEY,
  app_id bigint NOT NULL,
  function_id bigint NOT NULL REFERENCES functions(id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('http', 'event')),
  slug text,
  source text CHECK (source IN ('db', 'cms')),
  target text,
  operations text[] NOT NULL DEFAULT '{}',
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'http' AND slug IS NOT NULL) OR (kind = 'event' AND source IS NOT NULL AND target IS NOT NULL))
);
CREATE UNIQUE INDEX function_triggers_slug_idx ON function_triggers (app_id, slug) WHERE kind = 'http';
CREATE INDEX function_triggers_function_idx ON function_triggers (function_id);
CREATE INDEX function_triggers_event_idx ON function_triggers (app_id, source, target) WHERE kind = 'event';

CREATE TABLE function_invocations (
  id bigserial PRIMARY KEY,
  app_id bigint NOT NULL,
  function_id bigint NOT NULL REFERENCES functions(id) ON DELETE CASCADE,
  version integer,
  trigger_kind text NOT NULL,
  trigger_id bigint,
  status integer NOT NULL,
  outcome text NOT NULL,
  duration_ms double precision NOT NULL,
  memory_bytes bigint NOT NULL DEFAULT 0,
  error text,
  logs jsonb NOT NULL DEFAULT '[]',
  logs_truncated boolean NOT NULL DEFAULT false,
  request_id text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX function_invocations_function_idx ON function_invocations (function_id, id DESC);

-- Token buckets shared by every server process (one upsert per invocation).
CREATE TABLE function_rate_buckets (
  key text PRIMARY KEY,
  tokens double precision NOT NULL,
  allowed boolean NOT NULL,
  updated_at timestamptz NOT NULL
);
