-- The body each Idempotency-Key of a batch was first sent with (a digest), so
-- that the key sent again with a different body is refused (422) instead of
-- the second body being dropped as a duplicate. Kept as long as the
-- processed-batch records (the idempotency window).
CREATE TABLE analytics_idempotency_keys (
  batch_id text PRIMARY KEY,
  body_digest text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX analytics_idempotency_keys_at_idx ON analytics_idempotency_keys (created_at);
