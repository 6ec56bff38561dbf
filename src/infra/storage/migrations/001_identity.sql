-- Users, teams, applications, consumers and sessions.
CREATE TABLE users (
  id bigserial PRIMARY KEY,
  name text NOT NULL,
  email text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE teams (
  id bigserial PRIMARY KEY,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE team_members (
  team_id bigint NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  role text NOT NULL DEFAULT 'member',
  PRIMARY KEY (team_id, user_id)
);

CREATE TABLE apps (
  id bigserial PRIMARY KEY,
  team_id bigint NOT NULL REFERENCES teams(id),
  name text NOT NULL,
  app_key text NOT NULL UNIQUE,
  plan jsonb NOT NULL,
  strict_token_mode boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE consumers (
  id bigserial PRIMARY KEY,
  app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  user_id text NOT NULL,
  user_email text,
  device_id text NOT NULL,
  device_model text NOT NULL,
  os text NOT NULL,
  country text NOT NULL,
  language text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (app_id, device_id, user_id)
);

CREATE TABLE sessions (
  id bigserial PRIMARY KEY,
  consumer_id bigint NOT NULL REFERENCES consumers(id) ON DELETE CASCADE,
  app_id bigint NOT NULL,
  started_at timestamptz NOT NULL,
  ended_at timestamptz,
  CHECK (ended_at IS NULL OR ended_at >= started_at)
);
CREATE INDEX sessions_consumer_idx ON sessions (consumer_id, id);
