-- turbine_status.last_recorded_at is the newest reading of the turbine that `readings` holds.
-- Before this release a quarantined future timestamp could take its place (and `greatest` kept
-- it until real time passed it): the fleet page then looked the turbine's latest power up at a
-- key `readings` does not hold, and showed none. This repairs those rows: each turbine whose
-- last_recorded_at names no stored reading gets its newest stored one (NULL when it has none).
-- One turbine a statement, each on its own turbine's rows (on Citus, one shard each).
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN
        SELECT s.turbine_id
          FROM turbine_status s
          LEFT JOIN readings r
            ON r.turbine_id = s.turbine_id AND r.recorded_at = s.last_recorded_at
         WHERE s.last_recorded_at IS NOT NULL AND r.turbine_id IS NULL
    LOOP
        UPDATE turbine_status
           SET last_recorded_at = (SELECT max(recorded_at) FROM readings WHERE turbine_id = t)
         WHERE turbine_id = t;
    END LOOP;
END
$$;
