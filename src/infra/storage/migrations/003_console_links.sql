-- Issue #28: set-password links for accounts without a password (made by
-- CreateUser), and the audit log's retention sweep (rows older than
-- PULSEBASE_AUDIT_RETENTION_DAYS are deleted by age).
CREATE TABLE password_links (
  -- sha256 of the link's secret.
  token_hash text PRIMARY KEY,
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- The account that made it (NULL: the operator token). A link dies with
  -- its maker: SET NULL would turn it into an operator-token link.
  created_by bigint REFERENCES users(id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX password_links_user_idx ON password_links (user_id);

CREATE INDEX audit_log_at_idx ON audit_log (at);
