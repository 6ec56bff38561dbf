-- CMS: content types, entries, media, metering and the shared rate-limit windows.
-- pg_trgm goes into public so that dropping a per-test schema never drops it.
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;

CREATE TABLE cms_content_types (
  id bigserial PRIMARY KEY,
  app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  slug text NOT NULL,
  name text NOT NULL,
  description text NOT NULL DEFAULT '',
  icon text NOT NULL DEFAULT '',
  -- [{name,type,required,label,options,multi,target}] in display order
  fields jsonb NOT NULL,
  filterable_fields text[] NOT NULL DEFAULT '{}',
  sortable_fields text[] NOT NULL DEFAULT '{}',
  searchable_fields text[] NOT NULL DEFAULT '{}',
  default_sort text NOT NULL DEFAULT '',
  default_per_page int NOT NULL DEFAULT 20,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (app_id, slug)
);

-- Parses a date_time value (validated on write, offset defaults to UTC).
-- IMMUTABLE holds because the value always carries an explicit offset here.
CREATE FUNCTION cms_ts(v text) RETURNS timestamptz
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT CASE WHEN v ~ '(Z|z|[+-][0-9]{2}(:?[0-9]{2})?)$' THEN v ELSE v || 'Z' END::timestamptz $$;

CREATE TABLE cms_entries (
  id uuid PRIMARY KEY,
  app_id bigint NOT NULL,
  content_type_id bigint NOT NULL REFERENCES cms_content_types(id) ON DELETE CASCADE,
  data jsonb NOT NULL,
  -- searchable fields concatenated, HTML stripped (maintained by the service)
  search_text text NOT NULL DEFAULT '',
  search_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', search_text)) STORED,
  published boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  published_at timestamptz
);
-- Default order (newest published first) and the per-type published count.
CREATE INDEX cms_entries_published_idx ON cms_entries (content_type_id, published_at DESC, id DESC) WHERE published;
CREATE INDEX cms_entries_created_idx ON cms_entries (content_type_id, created_at DESC, id DESC) WHERE published;
CREATE INDEX cms_entries_updated_idx ON cms_entries (content_type_id, updated_at DESC, id DESC) WHERE published;
CREATE INDEX cms_entries_type_idx ON cms_entries (content_type_id, created_at DESC, id DESC);
-- Search: substring/prefix matches through trigrams, whole words through tsvector.
CREATE INDEX cms_entries_search_trgm_idx ON cms_entries USING gin (search_text gin_trgm_ops) WHERE published;
CREATE INDEX cms_entries_search_tsv_idx ON cms_entries USING gin (search_tsv) WHERE published;
-- Per-field expression indexes (cms_ix_<type id>_...) are created by the
-- service when a content type is saved.

CREATE TABLE cms_media (
  file_id text PRIMARY KEY,
  app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  content_type text NOT NULL,
  size bigint NOT NULL,
  filename text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cms_media_app_idx ON cms_media (app_id);

CREATE TABLE cms_usage_daily (
  app_id bigint NOT NULL,
  day date NOT NULL,
  counted bigint NOT NULL DEFAULT 0,
  included bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (app_id, day)
);

-- One row per application per one-second window: tokens handed out to the
-- processes serving the CMS (see src/capabilities/cms/rate-limiter.ts).
CREATE TABLE cms_rate_windows (
  app_id bigint NOT NULL,
  window_start bigint NOT NULL,
  used int NOT NULL,
  last_grant int NOT NULL,
  PRIMARY KEY (app_id, window_start)
);
