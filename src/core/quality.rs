//! Quality: what an interval's statistics say of its data — how complete it is, and the flags
//! an engineer checks before trusting a figure (the checks NREL's OpenOA runs on SCADA exports):
//! a frozen sensor (`stuck`, OpenOA's `unresponsive_flag`), values outside a signal's soft bounds
//! (`implausible`, its `range_flag`), and a signal some readings lacked (`absent`).
//!
//! Each is judged from figures that merge exactly (counts, minimum, maximum), so late data,
//! resends and resolutions give the flags one pass over the readings would.

/// The figures of one signal in one interval that the flags are judged from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// Readings stored in the interval, whichever signals they carry.
    pub readings: i64,
    /// Readings that carried this signal.
    pub n: i64,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Values outside the soft bounds; None where not counted (an interval written before).
    pub implausible: Option<i64>,
}

/// An interval's flags for one signal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    /// At least `stuck_min_readings` values, all equal: a frozen sensor.
    pub stuck: bool,
    /// Some value lay outside the soft bounds (`plausible_min`, `plausible_max`).
    pub implausible: bool,
    /// Some reading of the interval lacked the signal.
    pub absent: bool,
}

impl Flags {
    /// The flags raised, by name, in a fixed order (`stuck`, `implausible`, `absent`).
    pub fn names(&self) -> Vec<&'static str> {
        [
            (self.stuck, "stuck"),
            (self.implausible, "implausible"),
            (self.absent, "absent"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect()
    }

    pub fn any(&self) -> bool {
        self.stuck || self.implausible || self.absent
    }
}

/// The flag names, as `Flags::names` gives them and exports filter on.
pub(crate) const FLAG_NAMES: [&str; 3] = ["stuck", "implausible", "absent"];

/// Whether a signal of `kind` can show a frozen sensor by holding one value: a measured
/// (float) signal can; an integer one (a status code, a counter) holds one value by nature — a
/// turbine running all interval keeps status 1 — so it is never flagged stuck.
pub(crate) fn may_freeze(kind: crate::core::signals::Kind) -> bool {
    kind == crate::core::signals::Kind::Float
}

/// The flags of one signal's interval. `stuck_min_readings` is the least number of values that
/// can show a frozen sensor (fewer equal values are not evidence).
pub fn flags(f: &Figures, stuck_min_readings: i64) -> Flags {
    Flags {
        stuck: f.n >= stuck_min_readings.max(2)
            && f.min.zip(f.max).is_some_and(|(lo, hi)| lo == hi),
        implausible: f.implausible.is_some_and(|k| k > 0),
        absent: f.n < f.readings,
    }
}

/// How complete an interval is: its readings over those a complete one holds (None when the
/// sample period is not declared). Over 1 when a turbine sends faster than declared.
pub fn completeness(readings: i64, expected: Option<f64>) -> Option<f64> {
    expected.filter(|e| *e > 0.0).map(|e| readings as f64 / e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(readings: i64, n: i64, min: f64, max: f64, implausible: i64) -> Figures {
        Figures {
            readings,
            n,
            min: Some(min),
            max: Some(max),
            implausible: Some(implausible),
        }
    }

    #[test]
    fn a_frozen_sensor_needs_enough_equal_values() {
        assert!(flags(&f(300, 300, 7.5, 7.5, 0), 10).stuck);
        assert!(!flags(&f(9, 9, 7.5, 7.5, 0), 10).stuck, "too few to tell");
        assert!(!flags(&f(300, 300, 7.5, 7.6, 0), 10).stuck);
        assert!(
            !flags(&f(1, 1, 7.5, 7.5, 0), 1).stuck,
            "one value is never stuck"
        );
        let none = Figures {
            n: 0,
            min: None,
            max: None,
            ..f(5, 0, 0.0, 0.0, 0)
        };
        assert_eq!(flags(&none, 1).names(), ["absent"]);
    }

    #[test]
    fn implausible_and_absent_come_from_the_counts() {
        assert_eq!(
            flags(&f(300, 290, 1.0, 9.0, 3), 10).names(),
            ["implausible", "absent"]
        );
        let unknown = Figures {
            implausible: None,
            ..f(3, 3, 1.0, 2.0, 0)
        };
        assert!(!flags(&unknown, 10).any());
    }

    #[test]
    fn completeness_is_readings_over_expected() {
        assert_eq!(completeness(270, Some(300.0)), Some(0.9));
        assert_eq!(completeness(270, None), None);
        assert_eq!(completeness(310, Some(300.0)).map(|c| c > 1.0), Some(true));
    }
}
