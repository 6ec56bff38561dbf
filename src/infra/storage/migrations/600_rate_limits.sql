-- The leased rate limiter's state (src/infra/rate-limit/), a table per policy.
-- The CMS daily allowance moves here from cms_usage_daily.quota_claimed.
CREATE TABLE rate_limit_windows (
  name text NOT NULL,
  key text NOT NULL,
  window_start bigint NOT NULL,
  used bigint NOT NULL,
  last_grant bigint NOT NULL,
  PRIMARY KEY (name, key, window_start)
);
CREATE TABLE rate_limit_buckets (
  name text NOT NULL,
  key text NOT NULL,
  tokens double precision NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (name, key)
);
INSERT INTO rate_limit_windows (name, key, window_start, used, last_grant)
  SELECT 'cms-day', app_id::text, (day - DATE '1970-01-01')::bigint * 86400000, quota_claimed, 0
    FROM cms_usage_daily WHERE quota_claimed > 0 AND day >= CURRENT_DATE;
-- function_rate_buckets, cms_rate_windows, quota_claimed: unused, kept for
-- servers of the previous release during a rolling upgrade.
