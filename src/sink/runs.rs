//! Runs: the frozen values of each interval read back, the runs kept per interval
//! (`sink::stats::frozen`) chained across interval boundaries in SQL as `core::frozen::chain`
//! chains them — one source every reader of the `stuck` flag selects from.
//!
//! A run may go on through any number of neighbouring intervals, but whether a value is frozen
//! only asks whether its run reaches `min` values, and every interval a run passes through
//! whole holds at least one of them: so the intervals within `min` widths of the range asked
//! decide it exactly, and the source reads no further.

use crate::core::signals::Signal;
use crate::sink::stats::frozen::{run_columns, same_sql};
use crate::sink::stats::{column_names, lit};

/// The column of the source holding `s`'s frozen values in the interval (NULL where its runs
/// are not known: written before they were kept).
pub(crate) fn frozen_column(s: &Signal) -> String {
    format!("\"{}_frozen\"", s.name)
}

/// The signals whose runs are kept, with their rule resolved by the fleet's `k`.
fn judged(signals: &[Signal], k: i64) -> Vec<(&Signal, i64, f64)> {
    (signals.iter())
        .filter(|s| s.kind.is_numeric())
        .filter_map(|s| {
            let (min, tolerance) = s.rules.resolve(k).stuck_rule()?;
            Some((s, min, tolerance))
        })
        .collect()
}

/// The furthest a source reads beyond the range, in seconds: `min` widths of the longest run
/// asked for, within a thousand years (timestamps end in 294276).
fn margin(signals: &[Signal], k: i64, width: i32) -> f64 {
    let most = judged(signals, k).iter().map(|j| j.1).max().unwrap_or(0);
    (most as f64 * f64::from(width)).min(1000.0 * 366.0 * 86_400.0)
}

/// `interval_stats` of width `width` with, per signal judged stuck, its frozen values
/// ([`frozen_column`]), as a `FROM` item named `interval_stats`: the intervals starting in
/// `[from, to)` (SQL expressions) and `filter` (an `AND …` of the caller's, on the turbine) are
/// exact, the rows beyond them are context. Plain `interval_stats` when no signal is judged.
pub(crate) fn source(
    signals: &[Signal],
    k: i64,
    width: i32,
    (from, to): (&str, &str),
    filter: &str,
) -> String {
    let judged = judged(signals, k);
    if judged.is_empty() {
        return "interval_stats".into();
    }
    let m = lit(margin(signals, k, width));
    let w = format!("make_interval(secs => {width})");
    let q = |c: &str| format!("\"{c}\"");
    let (mut near, mut seams, mut groups, mut lengths, mut counts) =
        (vec![], vec![], vec![], vec![], vec![]);
    for (s, min, tolerance) in &judged {
        let name = &s.name;
        let n = q(&column_names(s)[0]);
        let [first, lead, last, trail, inside] = run_columns(s).map(|c| q(&c));
        let h = |what: &str| q(&format!("gw_{what}_{name}"));
        let same = |a: &str, b: &str| same_sql(a, b, *tolerance);
        near.push(format!(
            "lag({last}) OVER w AS {}, lead({first}) OVER w AS {}",
            h("prev_last"),
            h("next_first")
        ));
        seams.push(format!(
            "coalesce(gw_prev_at = interval_start - {w} AND {}, false) AS {}, \
             coalesce(gw_next_at = interval_start + {w} AND {}, false) AS {}, \
             coalesce({lead} = {n}, false) AS {}",
            same(&h("prev_last"), &first),
            h("joins_prev"),
            same(&last, &h("next_first")),
            h("joins_next"),
            h("whole")
        ));
        let (jp, jn, wh) = (h("joins_prev"), h("joins_next"), h("whole"));
        groups.push(format!(
            "sum(CASE WHEN {wh} AND {jp} THEN 0 ELSE 1 END) OVER (PARTITION BY turbine_id ORDER BY interval_start) AS {}, \
             sum(CASE WHEN {wh} AND {jn} THEN 0 ELSE 1 END) OVER (PARTITION BY turbine_id ORDER BY interval_start DESC) AS {}",
            h("back_run"),
            h("fwd_run")
        ));
        lengths.push(format!(
            "sum(CASE WHEN {wh} AND {jp} THEN {n} ELSE {trail} END) OVER (PARTITION BY turbine_id, {} ORDER BY interval_start) AS {}, \
             sum(CASE WHEN {wh} AND {jn} THEN {n} ELSE {lead} END) OVER (PARTITION BY turbine_id, {} ORDER BY interval_start DESC) AS {}",
            h("back_run"),
            h("back"),
            h("fwd_run"),
            h("fwd")
        ));
        let before = format!(
            "CASE WHEN {jp} THEN coalesce(lag({}) OVER w, 0) ELSE 0 END",
            h("back")
        );
        let after = format!(
            "CASE WHEN {jn} THEN coalesce(lead({}) OVER w, 0) ELSE 0 END",
            h("fwd")
        );
        let part =
            |len: &str, run: String| format!("CASE WHEN {run} >= {min} THEN {len} ELSE 0 END");
        counts.push(format!(
            "CASE WHEN {n} = 0 THEN 0 WHEN {lead} IS NULL THEN NULL ELSE {inside} + CASE WHEN {wh} \
             THEN {} ELSE {} + {} END END AS {}",
            part(&n, format!("{before} + {n} + {after}")),
            part(&lead, format!("{before} + {lead}")),
            part(&trail, format!("{trail} + {after}")),
            frozen_column(s)
        ));
    }
    let window = "WINDOW w AS (PARTITION BY turbine_id ORDER BY interval_start)";
    format!(
        "(SELECT * FROM (SELECT d.*, {counts} FROM (
  SELECT c.*, {lengths} FROM (
  SELECT b.*, {groups} FROM (
  SELECT a.*, {seams} FROM (
  SELECT x.*, lag(interval_start) OVER w AS gw_prev_at, lead(interval_start) OVER w AS gw_next_at, {near}
    FROM interval_stats x
   WHERE interval_seconds = {width}
     AND interval_start >= ({from})::timestamptz - make_interval(secs => {m})
     AND interval_start < ({to})::timestamptz + make_interval(secs => {m}){filter}
  {window}) a) b) c) d {window}) e
 WHERE interval_start >= ({from}) AND interval_start < ({to})) AS interval_stats",
        counts = counts.join(", "),
        lengths = lengths.join(", "),
        groups = groups.join(", "),
        seams = seams.join(", "),
        near = near.join(", "),
    )
}
