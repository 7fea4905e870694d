-- Interval statistics (src/store/stats.rs, docs/stats.md): per turbine and interval, the count of
-- readings and, per numeric signal, five columns `{signal}_n`, `_mean`, `_m2` (the sum of squared
-- deviations from the mean), `_min`, `_max`. The signal columns are added by `galewatch migrate`
-- for the declared signals, as `readings`' are (V7).
--
-- interval_seconds is part of the key: changing the `stats_interval` setting starts a new series
-- beside the old one instead of mixing widths in one row. Every query names the width.
--
-- Each batch merges into the rows of the intervals it touched (an UPDATE of the same row many
-- times in ten minutes): a fill factor below 100 leaves room on the page for the new version, so
-- the update is a heap-only one and the key index is not touched.
CREATE TABLE interval_stats (
    turbine_id       text        NOT NULL,
    interval_seconds int4        NOT NULL CHECK (interval_seconds > 0),
    interval_start   timestamptz NOT NULL,
    readings         bigint      NOT NULL CHECK (readings >= 0),
    PRIMARY KEY (turbine_id, interval_seconds, interval_start)
) WITH (fillfactor = 70);

-- Retention and fleet-wide reads go by time.
CREATE INDEX interval_stats_start ON interval_stats (interval_start);
