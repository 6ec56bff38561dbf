-- Event-trigger delivery without NATS (the embedded default): changes wait
-- here in order per lane; dead letters are kept per (event, trigger).
CREATE TABLE function_event_queue (
  seq bigserial PRIMARY KEY,
  event_id text NOT NULL UNIQUE,
  lane integer NOT NULL,
  payload jsonb NOT NULL,
  status text NOT NULL DEFAULT 'pending',
  claimed_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX function_event_queue_lane_idx ON function_event_queue (lane, seq) WHERE status <> 'done';

CREATE TABLE function_event_dead_letters (
  id bigserial PRIMARY KEY,
  event_id text NOT NULL,
  trigger_id bigint NOT NULL,
  function_id bigint NOT NULL,
  app_id bigint NOT NULL,
  attempts integer NOT NULL,
  error text NOT NULL,
  payload jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (event_id, trigger_id)
);
