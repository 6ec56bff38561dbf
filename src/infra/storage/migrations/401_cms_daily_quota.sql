-- The plan's daily allowance of counted CMS requests, enforced across
-- servers (src/capabilities/cms/daily-quota.ts): requests handed out to the servers today,
-- in small claims. `counted` stays the metered figure GetCmsUsage reports.
ALTER TABLE cms_usage_daily ADD COLUMN quota_claimed bigint NOT NULL DEFAULT 0;
