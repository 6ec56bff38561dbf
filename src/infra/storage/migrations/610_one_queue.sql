-- One durable queue for analytics batches and function events (the table
-- backend, no NATS): messages and dead letters of every queue in two tables,
-- rows told apart by queue name. What the earlier tables hold moves here:
-- waiting messages (a claim or backoff in progress starts over) and dead
-- letters, in their order.
CREATE TABLE queue_messages (
  id bigserial PRIMARY KEY,
  queue text NOT NULL,
  msg_id text NOT NULL,
  lane integer NOT NULL DEFAULT 0,
  topic text NOT NULL DEFAULT '',
  -- a replayed dead letter's attributes (e.g. the one trigger to run)
  attrs jsonb NOT NULL DEFAULT '{}',
  payload bytea NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  -- claimed (until the claim expires) or backing off (until the retry) while in the future
  visible_at timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (queue, msg_id)
);
CREATE INDEX queue_messages_lane_idx ON queue_messages (queue, lane, id);

CREATE TABLE queue_dead_letters (
  id bigserial PRIMARY KEY,
  queue text NOT NULL,
  -- one dead letter per failed delivery (and target)
  dead_key text NOT NULL,
  msg_id text NOT NULL,
  topic text NOT NULL DEFAULT '',
  attrs jsonb NOT NULL DEFAULT '{}',
  payload bytea NOT NULL,
  attempts integer NOT NULL,
  error text NOT NULL,
  dead_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (queue, dead_key)
);
CREATE INDEX queue_dead_letters_queue_idx ON queue_dead_letters (queue, id);

INSERT INTO queue_messages (queue, msg_id, payload, attempts, created_at)
SELECT 'analytics', msg_id, payload, attempts, created_at FROM analytics_queue WHERE status = 'ready' ORDER BY id;

INSERT INTO queue_dead_letters (queue, dead_key, msg_id, payload, attempts, error, dead_at)
SELECT 'analytics', msg_id || '~dead', msg_id, payload, attempts, coalesce(last_error, ''), coalesce(dead_at, created_at)
FROM analytics_queue WHERE status = 'dead' ORDER BY id;

-- Function events: the topic is "<source>.<app>" (the payload is the JSON the worker wrote).
INSERT INTO queue_messages (queue, msg_id, lane, topic, attrs, payload, created_at)
SELECT 'function-events', event_id, lane,
       coalesce(substring(payload from '"source":"([a-z]+)"'), 'db') || '.' || coalesce(substring(payload from '"app_id":([0-9]+)'), '0'),
       CASE WHEN trigger_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('Pb-Trigger-Id', trigger_id::text) END,
       convert_to(payload, 'UTF8'), created_at
FROM function_event_queue WHERE status <> 'done' ORDER BY seq;

INSERT INTO queue_dead_letters (queue, dead_key, msg_id, topic, attrs, payload, attempts, error, dead_at)
SELECT 'function-events', event_id || '~dead~' || trigger_id, event_id,
       coalesce(substring(payload from '"source":"([a-z]+)"'), 'db') || '.' || app_id,
       jsonb_build_object('Pb-Trigger-Id', trigger_id::text, 'Pb-Function-Id', function_id::text),
       convert_to(payload, 'UTF8'), attempts, error, created_at
FROM function_event_dead_letters ORDER BY id;

DROP TABLE analytics_queue;
DROP TABLE function_event_queue;
DROP TABLE function_event_dead_letters;
