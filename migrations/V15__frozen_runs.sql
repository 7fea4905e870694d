-- Frozen runs (docs/stats.md "Quality"): per interval the instants of its first and last
-- readings (microseconds since the epoch), so a batch landing wholly after or before what is
-- stored joins the per-signal run summaries exactly; NULL where written before.
ALTER TABLE interval_stats
    ADD COLUMN first_reading_us bigint,
    ADD COLUMN last_reading_us  bigint;

-- One signal's values of one interval, in time order, summarised as core::frozen::Runs does:
-- {first value, values in the run it starts with, last value, values in the run it ends with,
-- frozen values of the runs inside}. A run: consecutive values each within `tol` of the one
-- before (at 1e300 in magnitude or beyond, only equal ones: the difference could overflow);
-- frozen when at least `k` long. NULL for no values. One pass, no query inside.
CREATE FUNCTION galewatch_runs(v float8[], k bigint, tol float8) RETURNS float8[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    n      int := cardinality(v);
    run    bigint := 1;
    lead   bigint := 0;
    inside bigint := 0;
    joins  boolean;
BEGIN
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    FOR i IN 2..n LOOP
        IF v[i] = v[i - 1] THEN
            joins := true;
        ELSIF tol > 0 AND abs(v[i]) < 1e300 AND abs(v[i - 1]) < 1e300 THEN
            joins := abs(v[i] - v[i - 1]) <= tol;
        ELSE
            joins := false;
        END IF;
        IF joins THEN
            run := run + 1;
        ELSE
            IF lead = 0 THEN
                lead := run;
            ELSIF run >= k THEN
                inside := inside + run;
            END IF;
            run := 1;
        END IF;
    END LOOP;
    IF lead = 0 THEN
        lead := run;
    END IF;
    RETURN ARRAY[v[1], lead, v[n], run, inside];
END
$$;
