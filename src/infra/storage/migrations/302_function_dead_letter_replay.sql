-- Operator replay of function dead letters (table transport): a replayed
-- dead letter is queued again for its one trigger (trigger_id; NULL = every
-- matching trigger, as for a captured change), and dead letters are listed
-- per application, newest first. Payloads are kept as the JSON text the
-- worker wrote (jsonb reorders keys): a row's columns reach the function in
-- table order on both transports.
ALTER TABLE function_event_queue ADD COLUMN trigger_id bigint;
ALTER TABLE function_event_queue ALTER COLUMN payload TYPE text USING payload::text;
ALTER TABLE function_event_dead_letters ALTER COLUMN payload TYPE text USING payload::text;
CREATE INDEX function_event_dead_letters_app_idx ON function_event_dead_letters (app_id, id);
