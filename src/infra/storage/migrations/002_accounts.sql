-- Operator accounts of the console: passwords, the instance administrator,
-- roles per team, sessions, invitations, the first-owner setup token and the
-- audit log.
ALTER TABLE users ADD COLUMN password_hash text;
ALTER TABLE users ADD COLUMN is_admin boolean NOT NULL DEFAULT false;

-- Roles: owner, developer, viewer ('member' of teams made before accounts
-- existed reads as developer).
UPDATE team_members SET role = 'developer' WHERE role = 'member';

CREATE TABLE operator_sessions (
  -- sha256 of the cookie's secret: a stolen table does not sign anyone in.
  id_hash text PRIMARY KEY,
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  csrf_token text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  address text NOT NULL DEFAULT '',
  user_agent text NOT NULL DEFAULT ''
);
CREATE INDEX operator_sessions_user_idx ON operator_sessions (user_id);

CREATE TABLE team_invitations (
  id bigserial PRIMARY KEY,
  team_id bigint NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
  email text NOT NULL,
  role text NOT NULL,
  token_hash text NOT NULL UNIQUE,
  created_by bigint REFERENCES users(id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  accepted_at timestamptz
);

-- At most one pending first-owner setup token (row id 1).
CREATE TABLE console_setup (
  id integer PRIMARY KEY CHECK (id = 1),
  token_hash text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_log (
  id bigserial PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  actor_kind text NOT NULL,
  actor_user_id bigint,
  actor_email text NOT NULL DEFAULT '',
  method text NOT NULL,
  resource jsonb NOT NULL DEFAULT '{}',
  team_id bigint,
  outcome text NOT NULL,
  address text NOT NULL DEFAULT '',
  user_agent text NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_team_idx ON audit_log (team_id, id);
