//! Annotation: what an operator knows of a period that the data cannot show — a maintenance
//! visit, icing, an anemometer replaced, a vane misaligned since Tuesday — marked on a turbine
//! (or the turbines of a prefix, or one signal of them) with a reason and, optionally, an IEC
//! 61400-26-1 category; checked here, and read from brightwind's cleaning-file shape. Pure.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

use crate::core::availability::Category;
use crate::core::span::Span;

/// What an annotation covers: one turbine, or every turbine whose id starts with a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Turbine(String),
    Prefix(String),
}

impl Target {
    /// The id or prefix.
    pub fn text(&self) -> &str {
        match self {
            Target::Turbine(t) | Target::Prefix(t) => t,
        }
    }

    pub fn is_prefix(&self) -> bool {
        matches!(self, Target::Prefix(_))
    }

    /// Whether it covers `turbine`.
    pub fn covers(&self, turbine: &str) -> bool {
        match self {
            Target::Turbine(t) => t == turbine,
            Target::Prefix(p) => turbine.starts_with(p.as_str()),
        }
    }
}

/// One annotation.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    /// Its id once stored.
    pub id: Option<i64>,
    pub target: Target,
    /// The one signal it concerns; None: every signal of the turbine.
    pub signal: Option<String>,
    pub span: Span,
    /// The IEC 61400-26-1 category its time belongs to, when the operator names one.
    pub category: Option<Category>,
    pub reason: String,
}

/// The longest reason, in characters.
pub const MAX_REASON: usize = 1000;
/// The longest turbine id or prefix, in bytes (ids are topic levels).
pub const MAX_ID_BYTES: usize = 128;
/// The most annotations one cleaning file may hold.
pub const MAX_IMPORT: usize = 100_000;

impl Annotation {
    /// Whether it covers signal `signal` (None: the whole interval, any signal) of `turbine`
    /// at some time of `span`.
    pub fn covers(&self, turbine: &str, signal: Option<&str>, span: Span) -> bool {
        self.target.covers(turbine)
            && self.span.from < span.to
            && span.from < self.span.to
            && match (&self.signal, signal) {
                (None, _) => true,
                (Some(mine), Some(s)) => mine == s,
                (Some(_), None) => false,
            }
    }

    /// Checks it, `known` telling whether a signal is declared: else what is wrong.
    pub fn check(&self, known: impl Fn(&str) -> bool) -> Result<(), String> {
        check_id(self.target.text())?;
        if let Some(s) = self.signal.as_deref().filter(|s| !known(s)) {
            return Err(format!(
                "signal {}: not a declared signal",
                crate::core::shown::shown(s)
            ));
        }
        if self.span.from >= self.span.to {
            return Err(format!(
                "the period must end after it starts ({} – {})",
                self.span.from.to_rfc3339(),
                self.span.to.to_rfc3339()
            ));
        }
        let n = self.reason.chars().count();
        if n == 0 || n > MAX_REASON || self.reason.chars().any(char::is_control) {
            return Err(format!(
                "a reason is 1 to {MAX_REASON} characters on one line, without control characters"
            ));
        }
        Ok(())
    }
}

/// A turbine id or prefix as annotations take it: 1 to 128 bytes, no `/`, `+`, `#` (it is a
/// topic level) and no control characters.
pub fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty()
        || id.len() > MAX_ID_BYTES
        || id.chars().any(|c| c.is_control() || "/+#".contains(c))
    {
        return Err(format!(
            "turbine {}: an id (or prefix) is 1 to {MAX_ID_BYTES} bytes, without /, +, # or control characters",
            crate::core::shown::shown(id)
        ));
    }
    Ok(())
}

/// A category by its name (`scheduled_maintenance`); None: no such category.
pub fn category(name: &str) -> Option<Category> {
    Category::ALL.into_iter().find(|c| c.name() == name)
}

/// A time as a cleaning file writes it, UTC: RFC 3339, `YYYY-MM-DD HH:MM[:SS]` (also with a
/// `T`), or a date (its midnight).
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    parse_any(s).and_then(stored)
}

/// `t` as the database keeps it: whole microseconds (finer digits dropped, as the driver sends
/// them), a leap second the next minute's start — so the period checked is the period stored.
fn stored(t: DateTime<Utc>) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_micros(t.timestamp_micros())
}

fn parse_any(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.to_utc());
    }
    for f in [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Some(t.and_utc());
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

/// The fields of one CSV line (RFC 4180 quoting, on one line); None when a quote is left open.
fn fields(line: &str) -> Option<Vec<String>> {
    let mut out = vec![String::new()];
    let (mut quoted, mut chars) = (false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut()?.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            (c, _) => out.last_mut()?.push(c),
        }
    }
    (!quoted).then_some(out)
}

/// A header's name as [`column`] compares it: case, spaces and `_` ignored.
fn normal(h: &str) -> String {
    h.trim().to_ascii_lowercase().replace([' ', '_'], "")
}

/// The column of the first of `names` the header holds (case and spaces ignored).
fn column(header: &[String], names: &[&str]) -> Option<usize> {
    header
        .iter()
        .position(|h| names.contains(&normal(h).as_str()))
}

/// A cleaning file in brightwind's shape: a header naming `Sensor` (a signal, or `All` for the
/// whole turbine), `Start` and `Stop` (or `From`/`To`, `DateFrom`/`DateTo`, `End`), and
/// optionally `Reason` (or `Comment`), `Turbine` and `Category`; one period a line. A line
/// without a turbine takes `default` (the file of one mast, as brightwind's are). All or
/// nothing: the first line at fault is named. Each period with its line (from 1).
pub fn parse_cleaning_file(
    text: &str,
    default: Option<&Target>,
) -> Result<Vec<(usize, Annotation)>, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, head) = lines.next().ok_or("the file is empty: it needs a header")?;
    let head = fields(head.trim_start_matches('\u{feff}')).ok_or("line 1: a quote is left open")?;
    let names: Vec<String> = head.iter().map(|h| normal(h)).collect();
    if let Some((k, _)) = (names.iter().enumerate()).find(|(k, h)| names[..*k].contains(h)) {
        return Err(format!(
            "line 1: the header names {} twice",
            crate::core::shown::shown(&head[k])
        ));
    }
    let need = |names: &[&str], what: &str| {
        column(&head, names).ok_or_else(|| format!("the header names no {what} column"))
    };
    let sensor = column(&head, &["sensor", "signal"]);
    let start = need(&["start", "from", "datefrom"], "Start")?;
    let stop = need(&["stop", "end", "to", "dateto"], "Stop")?;
    let reason = column(&head, &["reason", "comment", "comments"]);
    let turbine = column(&head, &["turbine", "turbineid"]);
    let cat = column(&head, &["category"]);
    let mut out = Vec::new();
    for (i, line) in lines {
        let at = |problem: String| format!("line {}: {problem}", i + 1);
        if out.len() >= MAX_IMPORT {
            return Err(at(format!("more than {MAX_IMPORT} periods in one file")));
        }
        let f = fields(line).ok_or_else(|| at("a quote is left open".into()))?;
        if f.len() > head.len() {
            return Err(at(format!(
                "{} fields where the header names {}",
                f.len(),
                head.len()
            )));
        }
        let get = |k: Option<usize>| {
            k.and_then(|k| f.get(k))
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
        };
        let time = |k: usize, what: &str| {
            let s = get(Some(k)).ok_or_else(|| at(format!("no {what} time")))?;
            parse_time(s).ok_or_else(|| {
                at(format!(
                    "{what} {}: not a time (RFC 3339, YYYY-MM-DD HH:MM:SS in UTC, or a date)",
                    crate::core::shown::shown(s)
                ))
            })
        };
        let target = match (get(turbine), default) {
            (Some(t), _) => Target::Turbine(t.to_string()),
            (None, Some(d)) => d.clone(),
            (None, None) => return Err(at(
                "no turbine: give a Turbine column, or --turbine or --prefix for the whole file"
                    .into(),
            )),
        };
        let signal = get(sensor)
            .filter(|s| !s.eq_ignore_ascii_case("all"))
            .map(String::from);
        let category = match get(cat) {
            None => None,
            Some(c) => Some(category(c).ok_or_else(|| {
                at(format!(
                    "category {}: not an IEC 61400-26-1 category (scheduled_maintenance, forced_outage, …)",
                    crate::core::shown::shown(c)
                ))
            })?),
        };
        let a = Annotation {
            id: None,
            target,
            signal,
            span: Span::new(time(start, "Start")?, time(stop, "Stop")?),
            category,
            reason: get(reason).unwrap_or("from a cleaning file").to_string(),
        };
        // What can be told without the settings (the signal is checked against them later).
        a.check(|_| true).map_err(at)?;
        out.push((i + 1, a));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        parse_time(s).unwrap()
    }

    #[test]
    fn an_annotation_covers_its_turbines_signal_and_time() {
        let a = Annotation {
            id: None,
            target: Target::Prefix("MET-".into()),
            signal: Some("wind_speed_ms".into()),
            span: Span::new(t("2026-01-01 10:00"), t("2026-01-01 12:00")),
            category: None,
            reason: "iced".into(),
        };
        let hour = |h: &str| Span::new(t(h), t(h) + chrono::Duration::hours(1));
        assert!(a.covers("MET-1", Some("wind_speed_ms"), hour("2026-01-01 11:00")));
        assert!(a.covers("MET-1", Some("wind_speed_ms"), hour("2026-01-01 09:30")));
        assert!(
            !a.covers("MET-1", Some("wind_speed_ms"), hour("2026-01-01 12:00")),
            "ends"
        );
        assert!(!a.covers("MET-1", Some("power_kw"), hour("2026-01-01 11:00")));
        assert!(
            !a.covers("MET-1", None, hour("2026-01-01 11:00")),
            "one signal only"
        );
        assert!(!a.covers("WTG-1", Some("wind_speed_ms"), hour("2026-01-01 11:00")));
        let whole = Annotation {
            signal: None,
            target: Target::Turbine("WTG-1".into()),
            ..a.clone()
        };
        assert!(whole.covers("WTG-1", Some("power_kw"), hour("2026-01-01 11:00")));
        assert!(
            !whole.covers("WTG-10", None, hour("2026-01-01 11:00")),
            "an id, whole"
        );
    }

    #[test]
    fn times_are_taken_as_the_database_keeps_them() {
        // Finer than a microsecond: dropped, so such a period is seen empty before it is stored.
        assert_eq!(t("2026-12-01T00:00:00.0000001Z"), t("2026-12-01T00:00:00Z"));
        assert_eq!(
            t("9999-12-31T23:59:59.9999995Z"),
            t("9999-12-31T23:59:59.999999Z")
        );
        // A leap second is the next minute's start.
        assert_eq!(t("2026-12-05 23:59:60"), t("2026-12-06"));
    }

    #[test]
    fn a_bad_annotation_is_named() {
        let ok = Annotation {
            id: None,
            target: Target::Turbine("WTG-1".into()),
            signal: None,
            span: Span::new(t("2026-01-01"), t("2026-01-02")),
            category: None,
            reason: "visit".into(),
        };
        let known = |s: &str| s == "power_kw";
        assert_eq!(ok.check(known), Ok(()));
        for (bad, says) in [
            (
                Annotation {
                    signal: Some("pwr".into()),
                    ..ok.clone()
                },
                "not a declared signal",
            ),
            (
                Annotation {
                    span: Span::new(t("2026-01-02"), t("2026-01-01")),
                    ..ok.clone()
                },
                "end after it starts",
            ),
            (
                Annotation {
                    reason: "".into(),
                    ..ok.clone()
                },
                "a reason",
            ),
            (
                Annotation {
                    reason: "a\nb".into(),
                    ..ok.clone()
                },
                "a reason",
            ),
            (
                Annotation {
                    target: Target::Turbine("a/b".into()),
                    ..ok.clone()
                },
                "an id",
            ),
        ] {
            let e = bad.check(known).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_cleaning_file_in_brightwinds_shape_reads_whole_or_not_at_all() {
        let mast = Target::Turbine("MAST-1".into());
        let file = "\u{feff}Sensor,Start,Stop,Reason\nSpd80mN,2016-01-09 15:30:00,2016-01-09 17:40:00,\"iced, \"\"heavily\"\"\"\nAll,2016-02-01,2016-02-02,\n";
        let a = parse_cleaning_file(file, Some(&mast)).unwrap();
        assert_eq!(a.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [2, 3]);
        let a: Vec<Annotation> = a.into_iter().map(|(_, a)| a).collect();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].signal.as_deref(), Some("Spd80mN"));
        assert_eq!(a[0].reason, "iced, \"heavily\"");
        assert_eq!(a[0].span.from, t("2016-01-09T15:30:00Z"));
        assert_eq!(
            (a[1].signal.as_deref(), a[1].target.text()),
            (None, "MAST-1")
        );
        assert_eq!(a[1].reason, "from a cleaning file");
        let with = "turbine,signal,from,to,reason,category\nWTG-2,,2026-01-01T00:00:00+01:00,2026-01-01T05:00:00Z,visit,scheduled_maintenance\n";
        let a = parse_cleaning_file(with, None).unwrap();
        let a: Vec<Annotation> = a.into_iter().map(|(_, a)| a).collect();
        assert_eq!(a[0].target, Target::Turbine("WTG-2".into()));
        assert_eq!(a[0].span.from, t("2025-12-31T23:00:00Z"));
        assert_eq!(a[0].category, Some(Category::ScheduledMaintenance));
        for (bad, says) in [
            ("", "empty"),
            ("Sensor,Stop\n", "no Start"),
            (
                "Sensor,Start,Stop\nx,2016-13-01,2016-01-02\n",
                "line 2: Start",
            ),
            ("Sensor,Start,Stop\nx,2016-01-01\n", "line 2: no Stop"),
            (
                "Sensor,Start,Stop\n\"x,2016-01-01,2016-01-02\n",
                "line 2: a quote",
            ),
            (
                "Sensor,Start,Stop,Category\nx,2016-01-01,2016-01-02,lunch\n",
                "not an IEC",
            ),
            (
                "Sensor,Start,Stop,Reason\nAll,2025-03-06,2025-03-07,a,extra\n",
                "line 2: 5 fields where the header names 4",
            ),
            ("Sensor,sensor,Start,Stop\n", "line 1: the header names"),
            (
                "Sensor,Start,Stop\n\nAll,2025-03-07,2025-03-06\n",
                "line 3: ",
            ),
        ] {
            let e = parse_cleaning_file(bad, Some(&mast)).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        let e =
            parse_cleaning_file("Sensor,Start,Stop\nx,2016-01-01,2016-01-02\n", None).unwrap_err();
        assert!(e.contains("no turbine"), "{e}");
    }
}
