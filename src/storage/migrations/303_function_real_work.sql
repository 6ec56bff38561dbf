-- Functions that can do real work (issue 19): version content hashes,
-- HTTP trigger authentication modes, schedules with their run history, and
-- the per-application key-value store.

-- Versions: the SHA-256 of the code (hex), for identical-redeploy detection
-- and for the operator to tell versions apart.
ALTER TABLE function_versions ADD COLUMN code_sha256 text;
UPDATE function_versions SET code_sha256 = encode(sha256(convert_to(code, 'UTF8')), 'hex');
ALTER TABLE function_versions ALTER COLUMN code_sha256 SET NOT NULL;
CREATE INDEX function_versions_sha_idx ON function_versions (function_id, code_sha256);

-- Triggers: a third kind (schedule); HTTP triggers get an authentication
-- mode, and signed ones a secret, a header and a timestamp tolerance.
ALTER TABLE function_triggers DROP CONSTRAINT function_triggers_kind_check;
ALTER TABLE function_triggers DROP CONSTRAINT function_triggers_check;
ALTER TABLE function_triggers
  ADD COLUMN auth text NOT NULL DEFAULT 'consumer',
  ADD COLUMN signing_secret text,
  ADD COLUMN signature_header text,
  ADD COLUMN signature_tolerance_s integer,
  ADD COLUMN cron text,
  ADD COLUMN timezone text,
  ADD COLUMN missed_ticks text,
  -- The next tick not yet claimed by any process (schedule triggers).
  ADD COLUMN next_run_at timestamptz;
ALTER TABLE function_triggers ADD CONSTRAINT function_triggers_kind_check CHECK (kind IN ('http', 'event', 'schedule'));
ALTER TABLE function_triggers ADD CONSTRAINT function_triggers_auth_check CHECK (auth IN ('consumer', 'public', 'signed'));
ALTER TABLE function_triggers ADD CONSTRAINT function_triggers_check CHECK (
  (kind = 'http' AND slug IS NOT NULL AND (auth <> 'signed' OR signing_secret IS NOT NULL))
  OR (kind = 'event' AND source IS NOT NULL AND target IS NOT NULL)
  OR (kind = 'schedule' AND cron IS NOT NULL AND timezone IS NOT NULL AND missed_ticks IN ('skip', 'run_once')));
-- What every process's scheduler polls: enabled schedules by their next tick.
CREATE INDEX function_triggers_due_idx ON function_triggers (next_run_at) WHERE kind = 'schedule' AND enabled;

-- One row per claimed tick: the UNIQUE key is what makes a tick run once
-- however many processes saw it due.
CREATE TABLE function_schedule_runs (
  id bigserial PRIMARY KEY,
  trigger_id bigint NOT NULL REFERENCES function_triggers(id) ON DELETE CASCADE,
  app_id bigint NOT NULL,
  function_id bigint NOT NULL,
  scheduled_for timestamptz NOT NULL,
  -- running, ok, error, timeout or skipped
  status text NOT NULL,
  -- Ticks before this one that nobody ran (the process or the whole service was down).
  missed integer NOT NULL DEFAULT 0,
  invocation_id bigint,
  error text,
  server text NOT NULL DEFAULT '',
  started_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  UNIQUE (trigger_id, scheduled_for)
);
CREATE INDEX function_schedule_runs_trigger_idx ON function_schedule_runs (trigger_id, id DESC);
-- Housekeeping: runs left "running" by a stopped process, and the retention prune.
CREATE INDEX function_schedule_runs_running_idx ON function_schedule_runs (started_at) WHERE status = 'running';
CREATE INDEX function_schedule_runs_started_idx ON function_schedule_runs (started_at);

-- The key-value store: one row per key, sizes accounted per application.
CREATE TABLE function_kv (
  app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  key text COLLATE "C" NOT NULL,
  value text NOT NULL,
  -- octet_length(key) + octet_length(value): what the application's quota counts.
  size integer NOT NULL,
  expires_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (app_id, key)
);
CREATE INDEX function_kv_expiry_idx ON function_kv (expires_at) WHERE expires_at IS NOT NULL;

-- Per-application totals (expired keys count until the sweeper removes them).
CREATE TABLE function_kv_usage (
  app_id bigint PRIMARY KEY REFERENCES apps(id) ON DELETE CASCADE,
  bytes bigint NOT NULL DEFAULT 0,
  keys bigint NOT NULL DEFAULT 0
);

-- Invocation records: the error's parts (the error column keeps "Name: message").
ALTER TABLE function_invocations ADD COLUMN error_name text, ADD COLUMN error_message text, ADD COLUMN error_stack text;
