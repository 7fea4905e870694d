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
    /// Values in a frozen run (`core::frozen`, chained across the interval's neighbours); None
    /// where not known (written before runs were kept): the interval's own values judge it.
    pub frozen: Option<i64>,
}

/// An interval's flags for one signal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    /// Some value lies in a run of at least `stuck_min_readings` values each within
    /// `stuck_tolerance` of the one before, which may cross interval boundaries: a frozen
    /// sensor.
    pub stuck: bool,
    /// Some value lay outside the soft bounds (`plausible_min`, `plausible_max`).
    pub implausible: bool,
    /// Some reading of the interval lacked the signal.
    pub absent: bool,
    /// An operator's annotation covers it (`core::annotation`): not to be trusted, whatever
    /// the data says.
    pub excluded: bool,
}

impl Flags {
    /// The flags raised, by name, in a fixed order (`stuck`, `implausible`, `absent`,
    /// `excluded`).
    pub fn names(&self) -> Vec<&'static str> {
        [
            (self.stuck, "stuck"),
            (self.implausible, "implausible"),
            (self.absent, "absent"),
            (self.excluded, "excluded"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect()
    }

    pub fn any(&self) -> bool {
        self.stuck || self.implausible || self.absent || self.excluded
    }
}

/// The flags the data raises, as `Flags::names` names them (the gauges count these; an
/// operator's `excluded` is not the data's).
pub(crate) const FLAG_NAMES: [&str; 3] = ["stuck", "implausible", "absent"];

/// How one signal's flags are judged, as its `[[signals]]` table declares them (checked).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rules {
    /// The frozen-sensor rule; None where `stuck` does not apply: a signal that rests by nature
    /// (`stuck = false`: a pitch at its stop, a nacelle that does not yaw), or one that is not a
    /// float.
    pub stuck: Option<Stuck>,
    /// The turbine-id prefixes expected to send the signal (a met mast's `MET-`); empty: every
    /// turbine. `absent` is judged only for these.
    pub sent_by: Vec<String>,
}

/// A signal's frozen-sensor rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stuck {
    /// The least values of a run that show a frozen sensor; None: the fleet's
    /// `stats_stuck_min_readings`.
    pub min_readings: Option<i64>,
    /// The widest step between two values of one run (a frozen sensor whose last digit
    /// flickers); 0: equal values. Where runs are not known (intervals written before they were
    /// kept), the widest spread of an interval's values.
    pub tolerance: f64,
}

/// The fleet's `stats_stuck_min_readings` unless set.
pub const STUCK_MIN_READINGS: i64 = 10;

/// Values this large (in magnitude) are judged stuck only when all equal: their spread could
/// overflow, which PostgreSQL refuses where Rust gives ∞.
pub(crate) const SPREAD_LIMIT: f64 = 1e300;

/// A type's name with its article: "an integer", "a text".
fn article(kind: &str) -> String {
    let an = kind.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {kind}", if an { "an" } else { "a" })
}

/// The most turbine-id prefixes one signal's `sent_by` may list.
const MAX_SENT_BY: usize = 100;

impl Rules {
    /// The rules a signal's settings declare, checked (`kind`: its type's name, and whether a
    /// value of it can freeze: `Kind::freezes`): else the field to blame and what is wrong. `stuck`: on unless false (a float only); `stuck_min_readings` 2 to 1,000,000;
    /// `stuck_tolerance` finite, not negative; `sent_by` prefixes of turbine ids.
    pub(crate) fn checked(
        (kind, floats): (&str, bool),
        stuck: Option<bool>,
        min_readings: Option<i64>,
        tolerance: Option<f64>,
        sent_by: &[String],
    ) -> Result<Rules, (&'static str, String)> {
        if stuck == Some(true) && !floats {
            return Err((
                "stuck",
                format!(
                    "{} signal holds one value by nature: only a float is judged stuck",
                    article(kind)
                ),
            ));
        }
        let on = floats && stuck != Some(false);
        for (field, set) in [
            ("stuck_min_readings", min_readings.is_some()),
            ("stuck_tolerance", tolerance.is_some()),
        ] {
            if set && !on {
                let why = if floats {
                    "stuck = false".to_string()
                } else {
                    format!("{} signal is never judged stuck", article(kind))
                };
                return Err((field, format!("has nothing to tune: {why}")));
            }
        }
        if let Some(k) = min_readings.filter(|k| !(2..=1_000_000).contains(k)) {
            return Err((
                "stuck_min_readings",
                format!("{k}: must be 2 to 1000000 (fewer equal readings are no evidence)"),
            ));
        }
        if let Some(t) = tolerance.filter(|t| !(t.is_finite() && *t >= 0.0)) {
            return Err((
                "stuck_tolerance",
                format!("{t}: must be a spread of 0 or more"),
            ));
        }
        if sent_by.len() > MAX_SENT_BY {
            return Err(("sent_by", format!("lists more than {MAX_SENT_BY} prefixes")));
        }
        for p in sent_by {
            if p.is_empty()
                || p.len() > 128
                || p.chars().any(|c| c.is_control() || "/+#".contains(c))
            {
                return Err((
                    "sent_by",
                    format!(
                        "{}: a prefix of turbine ids is 1 to 128 bytes, without /, +, # or control characters",
                        crate::core::shown::shown(p)
                    ),
                ));
            }
        }
        Ok(Rules {
            stuck: on.then_some(Stuck {
                min_readings,
                tolerance: tolerance.unwrap_or(0.0),
            }),
            sent_by: sent_by.to_vec(),
        })
    }

    /// Whether `turbine` is expected to send the signal (its id starts with a `sent_by` prefix,
    /// or none is listed).
    pub fn expects(&self, turbine: &str) -> bool {
        expects(&self.sent_by, turbine)
    }

    /// The rules with the fleet's `stats_stuck_min_readings` (`k`) filled in.
    pub fn resolve(&self, k: i64) -> Rule<'_> {
        Rule {
            stuck: self
                .stuck
                .map(|s| (s.min_readings.unwrap_or(k).max(2), s.tolerance)),
            sent_by: &self.sent_by,
        }
    }
}

fn expects(sent_by: &[String], turbine: &str) -> bool {
    sent_by.is_empty() || sent_by.iter().any(|p| turbine.starts_with(p.as_str()))
}

/// One signal's rules, resolved: what [`flags`] and the SQL tests judge by.
#[derive(Debug, Clone, Copy)]
pub struct Rule<'a> {
    /// The least readings and the widest spread of a frozen sensor; None: never stuck.
    stuck: Option<(i64, f64)>,
    sent_by: &'a [String],
}

impl Rule<'_> {
    /// Whether `turbine` is expected to send the signal.
    pub fn expects(&self, turbine: &str) -> bool {
        expects(self.sent_by, turbine)
    }

    fn stuck(&self, f: &Figures) -> bool {
        if let (Some(_), Some(frozen)) = (self.stuck, f.frozen) {
            return frozen > 0;
        }
        // Runs not known: at least k values of the interval, their spread within tolerance.
        self.stuck.is_some_and(|(k, tolerance)| {
            f.n >= k
                && f.min.zip(f.max).is_some_and(|(lo, hi)| {
                    if lo.abs() < SPREAD_LIMIT && hi.abs() < SPREAD_LIMIT {
                        hi - lo <= tolerance
                    } else {
                        lo == hi
                    }
                })
        })
    }

    /// The least readings and the widest spread of a frozen sensor; None: never stuck (the SQL
    /// tests are written from these: `sink::quality`).
    pub fn stuck_rule(&self) -> Option<(i64, f64)> {
        self.stuck
    }

    /// The turbine-id prefixes expected to send the signal; empty: every turbine.
    pub fn sent_by(&self) -> &[String] {
        self.sent_by
    }
}

/// The flags of one signal's interval of `turbine`, judged by the signal's `rule`.
pub fn flags(f: &Figures, rule: &Rule, turbine: &str) -> Flags {
    Flags {
        stuck: rule.stuck(f),
        implausible: f.implausible.is_some_and(|k| k > 0),
        absent: f.n < f.readings && rule.expects(turbine),
        excluded: false,
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

    /// A float signal's rules, as declared with nothing more.
    fn float() -> Rules {
        Rules::checked(("float", true), None, None, None, &[]).unwrap()
    }

    /// `f`'s flags on turbine T-1 under the default rules and `k`.
    fn judged(f: &Figures, k: i64) -> Flags {
        flags(f, &float().resolve(k), "T-1")
    }

    fn f(readings: i64, n: i64, min: f64, max: f64, implausible: i64) -> Figures {
        Figures {
            readings,
            n,
            min: Some(min),
            max: Some(max),
            implausible: Some(implausible),
            frozen: None,
        }
    }

    #[test]
    fn a_frozen_sensor_needs_enough_equal_values() {
        assert!(judged(&f(300, 300, 7.5, 7.5, 0), 10).stuck);
        assert!(!judged(&f(9, 9, 7.5, 7.5, 0), 10).stuck, "too few to tell");
        assert!(!judged(&f(300, 300, 7.5, 7.6, 0), 10).stuck);
        assert!(
            !judged(&f(1, 1, 7.5, 7.5, 0), 1).stuck,
            "one value is never stuck"
        );
        let none = Figures {
            n: 0,
            min: None,
            max: None,
            ..f(5, 0, 0.0, 0.0, 0)
        };
        assert_eq!(judged(&none, 1).names(), ["absent"]);
    }

    #[test]
    fn frozen_values_judge_stuck_where_the_runs_are_known() {
        let known = |frozen| Figures {
            frozen: Some(frozen),
            ..f(6, 6, 1.0, 2.0, 0)
        };
        assert!(judged(&known(3), 10).stuck, "a run crossing into it");
        assert!(!judged(&known(0), 10).stuck);
        // Not known: the interval's own values, all equal.
        assert!(judged(&f(10, 10, 1.0, 1.0, 0), 10).stuck);
        let pitch = Rules::checked(("float", true), Some(false), None, None, &[]).unwrap();
        assert!(!flags(&known(6), &pitch.resolve(3), "T").stuck);
    }

    #[test]
    fn implausible_and_absent_come_from_the_counts() {
        assert_eq!(
            judged(&f(300, 290, 1.0, 9.0, 3), 10).names(),
            ["implausible", "absent"]
        );
        let unknown = Figures {
            implausible: None,
            ..f(3, 3, 1.0, 2.0, 0)
        };
        assert!(!judged(&unknown, 10).any());
    }

    #[test]
    fn completeness_is_readings_over_expected() {
        assert_eq!(completeness(270, Some(300.0)), Some(0.9));
        assert_eq!(completeness(270, None), None);
        assert_eq!(completeness(310, Some(300.0)).map(|c| c > 1.0), Some(true));
    }
}

#[cfg(test)]
mod rules {
    use super::*;

    fn rules(
        kind: (&str, bool),
        stuck: Option<bool>,
        k: Option<i64>,
        t: Option<f64>,
        sent_by: &[&str],
    ) -> Result<Rules, (&'static str, String)> {
        let sent_by: Vec<String> = sent_by.iter().map(|s| s.to_string()).collect();
        Rules::checked(kind, stuck, k, t, &sent_by)
    }

    const FLOAT: (&str, bool) = ("float", true);

    fn frozen(n: i64, lo: f64, hi: f64) -> Figures {
        Figures {
            readings: n,
            n,
            min: Some(lo),
            max: Some(hi),
            implausible: Some(0),
            frozen: None,
        }
    }

    #[test]
    fn a_signal_that_rests_by_nature_is_never_stuck() {
        let pitch = rules(FLOAT, Some(false), None, None, &[]).unwrap();
        assert_eq!(pitch.stuck, None);
        assert!(!flags(&frozen(300, -0.99, -0.99), &pitch.resolve(10), "T").stuck);
        // Nothing to tune where the rule is off, or cannot apply.
        for (kind, stuck, k, t, field) in [
            (FLOAT, Some(false), Some(5), None, "stuck_min_readings"),
            (FLOAT, Some(false), None, Some(0.1), "stuck_tolerance"),
            (
                ("integer", false),
                None,
                Some(5),
                None,
                "stuck_min_readings",
            ),
            (("text", false), Some(true), None, None, "stuck"),
        ] {
            let e = rules(kind, stuck, k, t, &[]).unwrap_err();
            assert_eq!(e.0, field, "{e:?}");
        }
    }

    #[test]
    fn its_own_run_and_tolerance_judge_it() {
        let pressure = rules(FLOAT, None, Some(36), Some(0.5), &[]).unwrap();
        let pressure = pressure.resolve(10);
        assert!(!flags(&frozen(35, 1013.0, 1013.0), &pressure, "T").stuck);
        assert!(flags(&frozen(36, 1013.0, 1013.5), &pressure, "T").stuck);
        assert!(!flags(&frozen(36, 1013.0, 1013.6), &pressure, "T").stuck);
        // The fleet's k where the signal names none; never under 2.
        let plain = rules(FLOAT, None, None, None, &[]).unwrap();
        assert!(flags(&frozen(2, 1.0, 1.0), &plain.resolve(1), "T").stuck);
        assert!(!flags(&frozen(1, 1.0, 1.0), &plain.resolve(1), "T").stuck);
        // Past what a spread can hold: all equal, or not stuck (no overflow to ∞).
        let wide = rules(FLOAT, None, None, Some(1.0), &[]).unwrap();
        let wide = wide.resolve(2);
        assert!(!flags(&frozen(9, -1e308, 1e308), &wide, "T").stuck);
        assert!(flags(&frozen(9, 1e308, 1e308), &wide, "T").stuck);
        for (k, t) in [
            (Some(1), None),
            (Some(1_000_001), None),
            (None, Some(-0.1)),
            (None, Some(f64::NAN)),
            (None, Some(f64::INFINITY)),
        ] {
            assert!(rules(FLOAT, None, k, t, &[]).is_err(), "{k:?} {t:?}");
        }
    }

    #[test]
    fn absent_is_judged_only_where_the_signal_is_expected() {
        let mast = rules(FLOAT, None, None, None, &["MET-", "mast"]).unwrap();
        let lacking = Figures {
            readings: 60,
            n: 0,
            min: None,
            max: None,
            implausible: Some(0),
            frozen: None,
        };
        assert!(flags(&lacking, &mast.resolve(10), "MET-1").absent);
        assert!(flags(&lacking, &mast.resolve(10), "mast").absent);
        assert!(!flags(&lacking, &mast.resolve(10), "WTG-1").absent);
        assert!(
            !flags(&lacking, &mast.resolve(10), "MET").absent,
            "a prefix, whole"
        );
        for bad in ["", "a/b", "x+", "#", "tab\t", &"x".repeat(129)] {
            let e = rules(FLOAT, None, None, None, &[bad]).unwrap_err();
            assert_eq!(e.0, "sent_by", "{bad:?}");
        }
        let many: Vec<String> = (0..101).map(|i| format!("P{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(rules(FLOAT, None, None, None, &many).is_err());
    }
}
