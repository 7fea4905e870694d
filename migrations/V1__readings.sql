-- One row per reading. The primary key is both the dedupe (INSERT ... ON CONFLICT DO NOTHING)
-- and the index an engineer's per-turbine panel reads time ranges from.
CREATE TABLE readings (
    turbine_id    text             NOT NULL,
    recorded_at   timestamptz      NOT NULL,
    power_kw      double precision NOT NULL,
    wind_speed_ms double precision,
    rotor_rpm     double precision,
    PRIMARY KEY (turbine_id, recorded_at)
);
