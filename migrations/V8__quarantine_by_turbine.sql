-- Every table that grows with the fleet is keyed by turbine first, so a distributed database
-- (Citus, docs/scaling.md) can shard it by `turbine_id` beside `readings` and keep each
-- statement of a batch on the shards of its turbines. `quarantine` was keyed by `id` alone and
-- its resolutions referred to that; a sharded table's keys must hold the shard column, so both
-- now carry the turbine. `id` stays unique (an identity) and is still how engineers name an
-- entry (`galewatch quarantine resolve ID`); the index below keeps that look-up cheap.
ALTER TABLE quarantine_resolution ADD COLUMN turbine_id text;
UPDATE quarantine_resolution r SET turbine_id = q.turbine_id FROM quarantine q WHERE q.id = r.quarantine_id;
ALTER TABLE quarantine_resolution ALTER COLUMN turbine_id SET NOT NULL;
ALTER TABLE quarantine_resolution DROP CONSTRAINT quarantine_resolution_quarantine_id_fkey;
ALTER TABLE quarantine_resolution DROP CONSTRAINT quarantine_resolution_pkey;
ALTER TABLE quarantine DROP CONSTRAINT quarantine_pkey;
ALTER TABLE quarantine ADD CONSTRAINT quarantine_pkey PRIMARY KEY (turbine_id, id);
CREATE INDEX quarantine_id ON quarantine (id);
ALTER TABLE quarantine_resolution ADD CONSTRAINT quarantine_resolution_pkey
    PRIMARY KEY (turbine_id, quarantine_id);
-- Retention deletes old quarantine entries; their resolutions go with them (as in V4).
ALTER TABLE quarantine_resolution ADD CONSTRAINT quarantine_resolution_quarantine_fkey
    FOREIGN KEY (turbine_id, quarantine_id) REFERENCES quarantine (turbine_id, id) ON DELETE CASCADE;
