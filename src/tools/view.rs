//! View: what `galewatch demo` shows, as text. Pure: a snapshot of the counters in, lines out,
//! never wider than 80 columns (the plain lines for a log are whole).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

/// Samples of a Prometheus exposition, keyed by series (`name` or `name{labels}`).
pub fn parse_exposition(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The counters the demo shows, read from one scrape (plus the quarantine table).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub elapsed: Duration,
    pub received: f64,
    pub inserted: f64,
    pub duplicate: f64,
    pub collision: f64,
    pub future: f64,
    /// Rejected by reason, in a fixed order.
    pub rejected: Vec<(&'static str, f64)>,
    pub unacked: f64,
    /// Ingest lag histogram sum and count (for an average between two snapshots).
    pub lag_sum: f64,
    pub lag_count: f64,
    /// Turbines with the most collisions: id and count.
    pub top_colliders: Vec<(String, i64)>,
}

impl Snapshot {
    pub fn from_samples(s: &HashMap<String, f64>, elapsed: Duration) -> Snapshot {
        let get = |k: &str| s.get(k).copied().unwrap_or(0.0);
        Snapshot {
            elapsed,
            received: get("galewatch_readings_received_total"),
            inserted: get("galewatch_readings_inserted_total"),
            duplicate: get("galewatch_readings_duplicate_total"),
            collision: get(r#"galewatch_readings_quarantined_total{reason="collision"}"#),
            future: get(r#"galewatch_readings_quarantined_total{reason="future_timestamp"}"#),
            rejected: [
                "malformed",
                "invalid_value",
                "identity_mismatch",
                "too_large",
                "unknown_alias",
                "unproven_birth",
            ]
            .into_iter()
            .map(|r| {
                (
                    r,
                    get(&format!(
                        r#"galewatch_readings_rejected_total{{reason="{r}"}}"#
                    )),
                )
            })
            .collect(),
            unacked: get("galewatch_messages_unacked"),
            lag_sum: get("galewatch_ingest_lag_seconds_sum"),
            lag_count: get("galewatch_ingest_lag_seconds_count"),
            top_colliders: Vec::new(),
        }
    }

    /// The same from an in-process daemon's probe (the demo), with no exposition in between.
    pub(crate) fn from_totals(
        totals: &crate::probe::Totals,
        unacked: usize,
        elapsed: Duration,
    ) -> Snapshot {
        let t = &totals.committed;
        Snapshot {
            elapsed,
            received: t.received as f64,
            inserted: t.inserted as f64,
            duplicate: t.duplicate as f64,
            collision: t.collision as f64,
            future: t.future_timestamp as f64,
            rejected: crate::core::outcome::RejectReason::ALL
                .iter()
                .zip(t.rejected)
                .map(|(r, n)| (r.as_str(), n as f64))
                .collect(),
            unacked: unacked as f64,
            lag_sum: totals.lag_sum_seconds,
            lag_count: t.inserted as f64,
            top_colliders: Vec::new(),
        }
    }

    pub fn rejected_total(&self) -> f64 {
        self.rejected.iter().map(|(_, v)| v).sum()
    }

    pub fn quarantined(&self) -> f64 {
        self.collision + self.future
    }

    /// received = inserted + duplicate + quarantined + rejected
    pub fn adds_up(&self) -> bool {
        self.received == self.inserted + self.duplicate + self.quarantined() + self.rejected_total()
    }

    /// Readings per second and average ingest lag since `prev`.
    fn rates(&self, prev: &Snapshot) -> (f64, Option<f64>) {
        let dt = (self.elapsed.saturating_sub(prev.elapsed)).as_secs_f64();
        let rate = if dt > 0.0 {
            (self.received - prev.received) / dt
        } else {
            0.0
        };
        let n = self.lag_count - prev.lag_count;
        let lag = (n > 0.0).then(|| (self.lag_sum - prev.lag_sum) / n);
        (rate, lag)
    }
}

fn n(v: f64) -> String {
    let v = v.max(0.0) as u64;
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn lag_text(lag: Option<f64>) -> String {
    match lag {
        Some(l) if l.abs() < 10.0 => format!("{:.0} ms", l * 1000.0),
        Some(l) => format!("{l:.1} s"),
        None => "-".into(),
    }
}

fn fit(mut line: String, width: usize) -> String {
    if line.chars().count() > width {
        line = line
            .chars()
            .take(width.saturating_sub(1))
            .collect::<String>()
            + "…";
    }
    line
}

/// The live view: a screenful of at most 80 columns.
pub fn render(now: &Snapshot, prev: &Snapshot, header: &str) -> Vec<String> {
    let (rate, lag) = now.rates(prev);
    let mut out = vec![
        header.to_string(),
        format!("{:-<80}", ""),
        format!(
            "running {:>5}s   in: {:>9} readings/s   lag: {:>9}   unacked: {:>7}",
            now.elapsed.as_secs(),
            n(rate),
            lag_text(lag),
            n(now.unacked)
        ),
        String::new(),
        format!("  received     {:>14}", n(now.received)),
        format!("  inserted     {:>14}", n(now.inserted)),
        format!(
            "  duplicate    {:>14}   (resends absorbed)",
            n(now.duplicate)
        ),
        format!(
            "  quarantined  {:>14}   collision {} · future_timestamp {}",
            n(now.quarantined()),
            n(now.collision),
            n(now.future)
        ),
    ];
    let mut rej = format!("  rejected     {:>14}  ", n(now.rejected_total()));
    for (reason, v) in &now.rejected {
        if *v > 0.0 {
            let _ = write!(rej, " {reason} {}", n(*v));
        }
    }
    out.push(rej);
    out.push(String::new());
    out.push(format!(
        "  received = inserted + duplicate + quarantined + rejected: {}",
        if now.adds_up() {
            "adds up"
        } else {
            "in flight"
        }
    ));
    out.push(String::new());
    out.push("  turbines with the most collisions (a drifting clock):".into());
    if now.top_colliders.is_empty() {
        out.push("    none yet".into());
    }
    for (id, c) in &now.top_colliders {
        out.push(format!("    {id:<40} {:>10}", n(*c as f64)));
    }
    out.into_iter().map(|l| fit(l, 80)).collect()
}

/// One plain line, for output that is not a terminal (a log or a pipe): whole, however wide,
/// since nothing there wraps it.
pub(crate) fn plain_line(now: &Snapshot, prev: &Snapshot) -> String {
    let (rate, lag) = now.rates(prev);
    format!(
        "t={}s in={}/s recv={} ins={} dup={} quar={} rej={} lag={} unacked={}",
        now.elapsed.as_secs(),
        n(rate),
        n(now.received),
        n(now.inserted),
        n(now.duplicate),
        n(now.quarantined()),
        n(now.rejected_total()),
        lag_text(lag),
        n(now.unacked)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(scale: f64) -> Snapshot {
        Snapshot {
            elapsed: Duration::from_secs(12),
            received: 10.0 * scale,
            inserted: 7.0 * scale,
            duplicate: 1.0 * scale,
            collision: 1.0 * scale,
            future: 0.0,
            rejected: vec![("malformed", 1.0 * scale), ("invalid_value", 0.0)],
            unacked: scale,
            lag_sum: 3.0,
            lag_count: 10.0,
            top_colliders: vec![("WTG-00001".into(), 12), ("x".repeat(100), 3)],
        }
    }

    #[test]
    fn fits_80_columns_whatever_the_numbers() {
        for scale in [0.0, 1.0, 1e6, 1e15] {
            let lines = render(&snap(scale), &Snapshot::default(), "galewatch demo");
            assert!(lines.iter().all(|l| l.chars().count() <= 80), "{lines:#?}");
            // A plain line is whole: the lag and the unacked count are never cut off.
            let plain = plain_line(&snap(scale), &Snapshot::default());
            assert!(
                plain.contains(" lag=") && plain.contains(" unacked="),
                "{plain}"
            );
        }
    }

    #[test]
    fn shows_the_counts_and_whether_they_add_up() {
        let s = snap(1000.0);
        assert!(s.adds_up());
        let text = render(&s, &Snapshot::default(), "h").join("\n");
        assert!(text.contains("7,000"), "{text}");
        assert!(text.contains("malformed 1,000"), "{text}");
        assert!(text.contains("adds up"), "{text}");
        assert!(text.contains("WTG-00001"), "{text}");
    }

    #[test]
    fn parses_an_exposition() {
        let s = parse_exposition("# HELP x y\nx_total 3\ny{reason=\"a b\"} 1.5\n");
        assert_eq!(s["x_total"], 3.0);
        assert_eq!(s["y{reason=\"a b\"}"], 1.5);
    }

    #[test]
    fn rates_between_snapshots() {
        let a = Snapshot {
            elapsed: Duration::from_secs(1),
            received: 100.0,
            ..Snapshot::default()
        };
        let b = Snapshot {
            elapsed: Duration::from_secs(3),
            received: 1100.0,
            lag_sum: 2.0,
            lag_count: 4.0,
            ..Snapshot::default()
        };
        assert_eq!(b.rates(&a), (500.0, Some(0.5)));
    }
}
