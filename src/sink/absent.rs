//! Absent: which declared signals each turbine's stored readings lack, read from the interval
//! counts (`{signal}_n` in `interval_stats`), and the watch that says so in the log and a gauge.
//!
//! A signal that no reading of a turbine carries is the mark of a misspelt pointer or Sparkplug B
//! metric name, or of a sensor gone: stored as NULL, silently, until someone asks. The counts
//! are exact (kept with the statistics, in each batch's transaction), so the answer is one
//! aggregate over the intervals of a window, however many readings they hold.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;
use tokio_postgres::GenericClient;

use crate::core::absence;
use crate::core::signals::Signals;
use crate::error::{DbContext, Error};
use crate::sink::stats::{count_column, Width};
use crate::telemetry;

/// One turbine whose readings of the window lacked some declared signals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lacking {
    pub turbine_id: String,
    /// Readings it stored in the window.
    pub readings: i64,
    /// Positions (in the declared list) of the signals none of them carried.
    pub missing: Vec<usize>,
}

/// The statement: per turbine with intervals starting at or after `$2` (of width `$1`; of the
/// turbines `$3` only, when given), the readings and each signal's count, for the turbines
/// where some signal's count is 0.
fn sql(signals: &Signals, only: bool) -> String {
    let sums: Vec<String> = signals
        .iter()
        .map(|s| format!("sum(\"{}\")::int8", count_column(s)))
        .collect();
    let zero: Vec<String> = sums.iter().map(|s| format!("{s} = 0")).collect();
    format!(
        "SELECT turbine_id, sum(readings)::int8, {}
           FROM interval_stats
          WHERE interval_seconds = $1 AND interval_start >= $2{}
          GROUP BY turbine_id
         HAVING sum(readings) > 0 AND ({})
          ORDER BY turbine_id",
        sums.join(", "),
        if only {
            " AND turbine_id = ANY($3)"
        } else {
            ""
        },
        zero.join(" OR ")
    )
}

/// The turbines whose readings stored since `since` (by interval start) lacked some declared
/// signal they are expected to send (its `sent_by`), every one of them; of `only` when given. Nothing when statistics are not kept.
pub(crate) async fn lacking<C: GenericClient>(
    c: &C,
    signals: &Signals,
    width: Width,
    since: DateTime<Utc>,
    only: Option<&[&str]>,
) -> Result<Vec<Lacking>, Error> {
    let w = width.secs();
    let since = width.start_of(since);
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&w, &since];
    if let Some(ids) = &only {
        params.push(ids);
    }
    let rows = c
        .query(&sql(signals, only.is_some()), &params)
        .await
        .db("reading which signals the turbines' readings lack")?;
    Ok(rows
        .iter()
        .map(|r| {
            let readings: i64 = r.get(1);
            let carried: Vec<Option<i64>> = (0..signals.len()).map(|i| r.get(2 + i)).collect();
            let turbine_id: String = r.get(0);
            let mut missing = absence::lacking(readings, &carried);
            // A signal the turbine is not expected to send (`sent_by`) is not missing there.
            missing.retain(|&i| signals.get(i).rules.expects(&turbine_id));
            Lacking {
                turbine_id,
                readings,
                missing,
            }
        })
        .filter(|l| !l.missing.is_empty())
        .collect())
}

/// The window [`look`] looks over.
const LOOK_WINDOW: Duration = Duration::from_secs(3600);

/// Turbine ids named in the log line per signal, at most.
const NAMED: usize = 5;

/// Sets `galewatch_turbines_missing_signal{signal}` (the turbines whose readings of the last
/// [`LOOK_WINDOW`] all lacked it) and, when some did, says so in one log line naming the
/// signals, how many turbines and the first few (`sink::quality::watch` calls it every 10
/// minutes).
pub async fn look(c: &tokio_postgres::Client, signals: &Signals, width: Width) {
    let since = Utc::now() - chrono::Duration::from_std(LOOK_WINDOW).expect("an hour");
    let found = match lacking(c, signals, width, since, None).await {
        Ok(found) => found,
        Err(e) => {
            tracing::debug!(error = %e, "looking for missing signals");
            return;
        }
    };
    let mut said = Vec::new();
    for (i, s) in signals.iter().enumerate() {
        let ids: Vec<&str> = found
            .iter()
            .filter(|l| l.missing.contains(&i))
            .map(|l| l.turbine_id.as_str())
            .collect();
        metrics::gauge!(telemetry::TURBINES_MISSING_SIGNAL, "signal" => s.name.clone())
            .set(ids.len() as f64);
        if !ids.is_empty() {
            let more = if ids.len() > NAMED { ", …" } else { "" };
            let named: Vec<_> = ids[..ids.len().min(NAMED)]
                .iter()
                .map(|id| crate::core::shown::shown(id))
                .collect();
            said.push(format!(
                "{} on {} turbine(s) ({}{more})",
                s.name,
                ids.len(),
                named.join(", ")
            ));
        }
    }
    if !said.is_empty() {
        tracing::warn!(
            missing = %said.join("; "),
            window = ?LOOK_WINDOW,
            "declared signals missing from every reading of some turbines: check each one's pointer (or Sparkplug B metric name), or the sensor (galewatch turbines lists them)"
        );
    }
}
