-- Functions' fetch: each application's egress policy (docs/functions.md,
-- "Calling other services: fetch"). No row: the default policy (any public
-- host, private addresses refused).
CREATE TABLE function_egress_policies (
  app_id bigint PRIMARY KEY REFERENCES apps(id) ON DELETE CASCADE,
  -- exact host names or addresses, and "*.suffix" patterns; empty: any public host
  allow_hosts text[] NOT NULL DEFAULT '{}',
  allow_private boolean NOT NULL DEFAULT false,
  updated_at timestamptz NOT NULL DEFAULT now()
);
