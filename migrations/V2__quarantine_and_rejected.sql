-- Readings that share a key with a stored reading but not its values (a drifting clock), or that
-- are stamped too far in the future: kept for review, never silently dropped.
CREATE TABLE quarantine (
    id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    turbine_id             text             NOT NULL,
    recorded_at            timestamptz      NOT NULL,
    power_kw               double precision NOT NULL,
    wind_speed_ms          double precision,
    rotor_rpm              double precision,
    reason                 text             NOT NULL CHECK (reason IN ('collision', 'future_timestamp')),
    -- The values of the readings row it collided with (NULL for future_timestamp).
    existing_power_kw      double precision,
    existing_wind_speed_ms double precision,
    existing_rotor_rpm     double precision,
    topic                  text             NOT NULL,
    received_at            timestamptz      NOT NULL,
    -- A resend of a quarantined reading must not add a second row (it counts as a duplicate).
    CONSTRAINT quarantine_reading_once
        UNIQUE NULLS NOT DISTINCT (turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm)
);
CREATE INDEX quarantine_received_at ON quarantine (received_at);

-- Input that could not be read as a valid reading, with the reason named.
CREATE TABLE rejected (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    received_at   timestamptz NOT NULL,
    topic         text        NOT NULL,
    -- The payload exactly as received (for too_large, its first 64 KiB).
    payload       bytea       NOT NULL,
    payload_bytes integer     NOT NULL,
    -- Index of the bad element in an array message; NULL when the whole message is refused.
    element       integer,
    reason        text        NOT NULL
        CHECK (reason IN ('malformed', 'invalid_value', 'identity_mismatch', 'too_large')),
    detail        text        NOT NULL
);
-- A redelivered message must not add its rejection twice.
CREATE UNIQUE INDEX rejected_once ON rejected (topic, md5(payload), payload_bytes, coalesce(element, -1));
CREATE INDEX rejected_received_at ON rejected (received_at);
