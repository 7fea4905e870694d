-- `readings` becomes range-partitioned on recorded_at, so years of readings are pruned by dropping
-- whole partitions instead of a week-long DELETE. The primary key (turbine_id, recorded_at)
-- contains the partition key, so it still holds: one key maps to exactly one partition.
--
-- Existing rows are kept: the old table is renamed, one daily partition is created for every day
-- it holds, its rows are copied across, and it is dropped (see docs/partitioning.md for the time
-- this takes per million rows). The daemon must be stopped while this runs.
ALTER TABLE readings RENAME TO readings_unpartitioned;
ALTER TABLE readings_unpartitioned RENAME CONSTRAINT readings_pkey TO readings_unpartitioned_pkey;

CREATE TABLE readings (
    turbine_id    text             NOT NULL,
    recorded_at   timestamptz      NOT NULL,
    power_kw      double precision NOT NULL,
    wind_speed_ms double precision,
    rotor_rpm     double precision,
    -- The values ride in the key's index (INCLUDE) so a turbine's panel is an index-only scan:
    -- in arrival order each heap page holds one reading per turbine, so a day of one turbine
    -- would otherwise touch ~43,000 pages (480 ms) instead of ~360 (50 ms). docs/panel.md.
    PRIMARY KEY (turbine_id, recorded_at) INCLUDE (power_kw, wind_speed_ms, rotor_rpm)
) PARTITION BY RANGE (recorded_at);

-- The safety net: a reading whose partition does not exist lands here rather than failing its
-- batch. The daemon keeps it empty in normal running (it creates partitions ahead and moves any
-- rows here into a partition when it creates one); readings stamped further back than the
-- daemon's `readings_partition_backfill` stay here on purpose, so a clock reset to years ago
-- cannot make thousands of tables.
CREATE TABLE readings_default PARTITION OF readings DEFAULT;

-- The partitions the daemon made, with their bounds (reading bounds back out of pg_class is
-- awkward; this is what the writer caches and retention walks).
CREATE TABLE galewatch_partition (
    name    text PRIMARY KEY,
    from_at timestamptz NOT NULL UNIQUE,
    to_at   timestamptz NOT NULL,
    created timestamptz NOT NULL DEFAULT now(),
    CHECK (from_at < to_at)
);

-- Makes sure a partition holds `ts`: if none does, creates the one `size` wide aligned on
-- Monday 2000-01-03 00:00 UTC (days start at midnight UTC), clipped so it never overlaps a
-- neighbour made with another size, moves into it any rows the default partition held for its
-- range, and attaches it. Returns true if it created one. Safe from several sessions at once.
CREATE FUNCTION galewatch_ensure_partition(ts timestamptz, size interval) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    lo timestamptz;
    hi timestamptz;
    nm text;
BEGIN
    PERFORM FROM galewatch_partition WHERE from_at <= ts AND ts < to_at;
    IF FOUND THEN
        RETURN false;
    END IF;
    -- One creator at a time; look again once we hold the lock.
    PERFORM pg_advisory_xact_lock(7450279841213101938);
    PERFORM FROM galewatch_partition WHERE from_at <= ts AND ts < to_at;
    IF FOUND THEN
        RETURN false;
    END IF;
    lo := date_bin(size, ts, TIMESTAMPTZ '2000-01-03 00:00:00+00');
    hi := lo + size;
    lo := greatest(lo, (SELECT max(to_at) FROM galewatch_partition WHERE to_at <= ts));
    hi := least(hi, (SELECT min(from_at) FROM galewatch_partition WHERE from_at > ts));
    nm := 'readings_p' || to_char(lo AT TIME ZONE 'UTC',
        CASE WHEN (lo AT TIME ZONE 'UTC')::time = '00:00' THEN 'YYYYMMDD' ELSE 'YYYYMMDD"_"HH24MISS' END);
    -- Taken first, so the lock is never upgraded half-way (a deadlock with a writer).
    LOCK TABLE readings_default IN ACCESS EXCLUSIVE MODE;
    EXECUTE format('CREATE TABLE %I (LIKE readings INCLUDING ALL)', nm);
    EXECUTE format('WITH moved AS (DELETE FROM readings_default WHERE recorded_at >= $1 AND recorded_at < $2 RETURNING *)
                    INSERT INTO %I SELECT * FROM moved', nm) USING lo, hi;
    -- A constraint that matches the bounds lets ATTACH skip scanning the new table.
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (recorded_at >= %L AND recorded_at < %L)',
        nm, nm || '_bounds', lo, hi);
    EXECUTE format('ALTER TABLE readings ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', nm, lo, hi);
    INSERT INTO galewatch_partition (name, from_at, to_at) VALUES (nm, lo, hi);
    RETURN true;
END
$$;

DO $$
DECLARE
    d timestamptz;
BEGIN
    FOR d IN SELECT DISTINCT date_bin('1 day', recorded_at, TIMESTAMPTZ '2000-01-03 00:00:00+00')
               FROM readings_unpartitioned LOOP
        PERFORM galewatch_ensure_partition(d, '1 day');
    END LOOP;
END
$$;
INSERT INTO readings SELECT turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm
  FROM readings_unpartitioned;
DO $$
BEGIN
    IF (SELECT count(*) FROM readings) <> (SELECT count(*) FROM readings_unpartitioned) THEN
        RAISE EXCEPTION 'converting readings: row counts differ; nothing changed';
    END IF;
END
$$;
DROP TABLE readings_unpartitioned;

-- Retention deletes old quarantine entries; their resolutions go with them.
ALTER TABLE quarantine_resolution
    DROP CONSTRAINT quarantine_resolution_quarantine_id_fkey,
    ADD CONSTRAINT quarantine_resolution_quarantine_id_fkey
        FOREIGN KEY (quarantine_id) REFERENCES quarantine (id) ON DELETE CASCADE;
