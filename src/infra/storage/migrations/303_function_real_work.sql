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

-- A put and a delete in one call each (one round trip, autocommit): the
-- application's usage row lock is taken first and held only while the
-- function runs; each statement inside sees what committed before it (READ
-- COMMITTED takes a snapshot per statement), so the totals stay exact.
CREATE FUNCTION function_kv_put(p_app bigint, p_key text, p_value text, p_size integer, p_ttl integer, p_max_bytes bigint, p_max_keys bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  u_bytes bigint;
  u_keys bigint;
  old_size integer;
BEGIN
  INSERT INTO function_kv_usage AS u (app_id) VALUES (p_app)
    ON CONFLICT (app_id) DO UPDATE SET app_id = EXCLUDED.app_id
    RETURNING u.bytes, u.keys INTO u_bytes, u_keys;
  SELECT k.size INTO old_size FROM function_kv k WHERE k.app_id = p_app AND k.key = p_key;
  IF old_size IS NULL THEN
    IF u_keys + 1 > p_max_keys OR u_bytes + p_size > p_max_bytes THEN RETURN false; END IF;
  ELSIF p_size > old_size AND u_bytes + p_size - old_size > p_max_bytes THEN
    RETURN false;
  END IF;
  INSERT INTO function_kv (app_id, key, value, size, expires_at, updated_at)
    VALUES (p_app, p_key, p_value, p_size, CASE WHEN p_ttl IS NULL THEN NULL ELSE now() + make_interval(secs => p_ttl) END, now())
    ON CONFLICT (app_id, key) DO UPDATE SET value = EXCLUDED.value, size = EXCLUDED.size,
      expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at;
  UPDATE function_kv_usage SET bytes = bytes + p_size - COALESCE(old_size, 0),
    keys = keys + CASE WHEN old_size IS NULL THEN 1 ELSE 0 END
    WHERE app_id = p_app;
  RETURN true;
END $$;

-- True when a live (unexpired) key was deleted.
CREATE FUNCTION function_kv_delete(p_app bigint, p_key text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  old_size integer;
  was_live boolean;
BEGIN
  INSERT INTO function_kv_usage (app_id) VALUES (p_app) ON CONFLICT (app_id) DO UPDATE SET app_id = EXCLUDED.app_id;
  DELETE FROM function_kv k WHERE k.app_id = p_app AND k.key = p_key
    RETURNING k.size, (k.expires_at IS NULL OR k.expires_at > now()) INTO old_size, was_live;
  IF old_size IS NULL THEN RETURN false; END IF;
  UPDATE function_kv_usage SET bytes = bytes - old_size, keys = keys - 1 WHERE app_id = p_app;
  RETURN was_live;
END $$;
