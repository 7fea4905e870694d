-- Frozen runs (docs/stats.md "Quality"): per interval the instants of its first and last
-- readings (microseconds since the epoch), so a batch landing wholly after or before what is
-- stored joins the per-signal run summaries exactly; NULL where written before.
ALTER TABLE interval_stats
    ADD COLUMN first_reading_us bigint,
    ADD COLUMN last_reading_us  bigint;

-- One signal's values of one interval, in time order, summarised as core::frozen::Runs does:
-- {first value, values in the run it starts with, last value, values in the run it ends with,
-- frozen values of the runs inside}. A run: consecutive values each within `tol` of the one
-- before (at 1e300 in magnitude or beyond, only equal ones: the difference could overflow); frozen
-- when at least `k` long. NULL for no values.
CREATE FUNCTION galewatch_runs(v float8[], k bigint, tol float8) RETURNS float8[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    WITH steps AS (
        SELECT i, CASE
                   WHEN i = 1 THEN 1
                   WHEN v[i] = v[i - 1] THEN 0
                   WHEN tol > 0 AND abs(v[i]) < 1e300 AND abs(v[i - 1]) < 1e300
                       THEN CASE WHEN abs(v[i] - v[i - 1]) <= tol THEN 0 ELSE 1 END
                   ELSE 1
               END AS starts
          FROM generate_subscripts(v, 1) AS i
    ), numbered AS (
        SELECT i, sum(starts) OVER (ORDER BY i) AS run FROM steps
    ), runs AS (
        SELECT count(*) AS len, min(i) AS a, max(i) AS b FROM numbered GROUP BY run
    )
    SELECT CASE WHEN cardinality(v) = 0 THEN NULL ELSE ARRAY[
        v[1],
        (SELECT len FROM runs WHERE a = 1)::float8,
        v[cardinality(v)],
        (SELECT len FROM runs WHERE b = cardinality(v))::float8,
        (SELECT coalesce(sum(len), 0) FROM runs
          WHERE a > 1 AND b < cardinality(v) AND len >= k)::float8
    ] END
$$;
