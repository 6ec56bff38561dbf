-- Issue #30: the console's home page (OverviewService/GetOverview) lists a
-- team's applications, newest first, with one index range scan.
CREATE INDEX IF NOT EXISTS apps_team_idx ON apps (team_id, id);
