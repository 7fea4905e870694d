-- Per-turbine clock health, maintained by the daemon once per batch.
CREATE TABLE turbine_status (
    turbine_id            text PRIMARY KEY,
    first_seen            timestamptz NOT NULL,
    last_seen             timestamptz NOT NULL,
    last_recorded_at      timestamptz,
    readings              bigint NOT NULL DEFAULT 0,
    duplicates            bigint NOT NULL DEFAULT 0,
    collisions            bigint NOT NULL DEFAULT 0,
    future_timestamps     bigint NOT NULL DEFAULT 0,
    -- Arrival time minus recorded_at, in seconds: a lower envelope (follows a falling offset at
    -- once, a rising one slowly), so network delay, a broker backlog and resends do not read as a
    -- slow clock. Positive: the clock is behind; negative: ahead.
    offset_seconds        double precision,
    -- The offset at the start of the current drift window, and the drift measured over the last
    -- completed window, in seconds per day (negative: the clock gains time).
    anchor_offset         double precision,
    anchor_at             timestamptz,
    drift_seconds_per_day double precision
) WITH (fillfactor = 50); -- every batch updates these rows: leave room for HOT updates

-- The lower-envelope smoothing of the offset (see above).
CREATE FUNCTION galewatch_offset(old double precision, sample double precision, alpha double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN sample IS NULL THEN old
        WHEN old IS NULL OR sample < old THEN sample
        ELSE old + alpha * (sample - old)
    END
$$;

-- How engineers settled quarantined readings. One resolution per entry.
CREATE TABLE quarantine_resolution (
    quarantine_id bigint PRIMARY KEY REFERENCES quarantine (id),
    choice        text NOT NULL CHECK (choice IN ('existing', 'incoming')),
    resolved_by   text NOT NULL,
    resolved_at   timestamptz NOT NULL DEFAULT now(),
    note          text
);
