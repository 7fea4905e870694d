-- Signals come from the settings (`[[signals]]`): `galewatch migrate` adds a column to
-- `readings` and two to `quarantine` for each new one (src/store/migrate.rs), and remembers here
-- what was declared, so it can refuse what it cannot change safely (a type change, a required
-- signal dropped from the settings) and never drops a column by itself. docs/signals.md.
CREATE TABLE galewatch_signal (
    name        text PRIMARY KEY,
    kind        text        NOT NULL CHECK (kind IN ('float', 'integer', 'boolean', 'text')),
    required    boolean     NOT NULL,
    unit        text        NOT NULL DEFAULT '',
    position    integer     NOT NULL,
    declared_at timestamptz NOT NULL DEFAULT now(),
    -- Set when the settings stop declaring it; the column stays, NULL for new readings.
    retired_at  timestamptz
);
INSERT INTO galewatch_signal (name, kind, required, unit, position) VALUES
    ('power_kw', 'float', true, 'kW', 0),
    ('wind_speed_ms', 'float', false, 'm/s', 1),
    ('rotor_rpm', 'float', false, 'rpm', 2);

-- A quarantine row was named by its key and its three values (a unique constraint over the
-- columns). With any number of signals it is named by its key and a digest of its values
-- instead: SHA-256 over the non-null values in name order, each as name, NUL, a type letter and
-- its bytes (`Signals::digest` in src/signals.rs computes the same for new rows). A NULL adds
-- nothing, so a signal added later leaves older rows' digests true.
ALTER TABLE quarantine ADD COLUMN values_sha256 bytea;
UPDATE quarantine SET values_sha256 = sha256(
       coalesce(convert_to('power_kw', 'UTF8') || '\x0066'::bytea || float8send(power_kw + 0::float8), ''::bytea)
    || coalesce(convert_to('rotor_rpm', 'UTF8') || '\x0066'::bytea || float8send(rotor_rpm + 0::float8), ''::bytea)
    || coalesce(convert_to('wind_speed_ms', 'UTF8') || '\x0066'::bytea || float8send(wind_speed_ms + 0::float8), ''::bytea));
-- Left nullable: a row written by hand (a fixture, an import) without one is kept out of the
-- uniqueness, as it was never Galewatch's to deduplicate; every row the daemon writes has one.
ALTER TABLE quarantine ADD CONSTRAINT quarantine_values_sha256_length CHECK (length(values_sha256) = 32);
ALTER TABLE quarantine DROP CONSTRAINT quarantine_reading_once;
ALTER TABLE quarantine ADD CONSTRAINT quarantine_reading_once
    UNIQUE (turbine_id, recorded_at, values_sha256);
