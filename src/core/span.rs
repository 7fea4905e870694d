//! A span of time, UTC: from its start (included) to its end (excluded), the shape of every
//! window the statistics, the panel and the exports read.

use chrono::{DateTime, Utc};

/// From `from` (included) to `to` (excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

impl Span {
    pub fn new(from: DateTime<Utc>, to: DateTime<Utc>) -> Span {
        Span { from, to }
    }

    /// Whether `t` lies in it.
    pub fn contains(&self, t: DateTime<Utc>) -> bool {
        self.from <= t && t < self.to
    }

    /// Its length (negative for a span whose end is before its start).
    pub fn length(&self) -> chrono::Duration {
        self.to - self.from
    }
}

/// A `(from, to)` pair, as the figures' callers hold one.
impl From<(DateTime<Utc>, DateTime<Utc>)> for Span {
    fn from((from, to): (DateTime<Utc>, DateTime<Utc>)) -> Span {
        Span { from, to }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_span_holds_its_start_and_not_its_end() {
        let at = |h| Utc.with_ymd_and_hms(2026, 12, 6, h, 0, 0).unwrap();
        let s = Span::new(at(1), at(3));
        assert!(s.contains(at(1)) && s.contains(at(2)));
        assert!(!s.contains(at(3)) && !s.contains(at(0)));
        assert_eq!(s.length(), chrono::Duration::hours(2));
    }
}
