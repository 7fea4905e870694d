//! Availability: IEC 61400-26-1's information categories, how a status signal's values map to
//! them (with the standard's priority where two apply), and time-based availability from the
//! time in each — counted per interval like every other statistic, so it merges exactly.

use std::collections::{BTreeMap, HashMap};

use crate::core::setting::{group, SettingError};
use crate::core::signals::Datum;

/// IEC 61400-26-1:2019's information categories, in its priority order: where two apply to one
/// moment, the one listed first is the moment's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    FullPerformance,
    PartialPerformance,
    TechnicalStandby,
    OutOfElectricalSpecification,
    RequestedShutdown,
    OutOfEnvironmentalSpecification,
    ScheduledMaintenance,
    PlannedCorrectiveAction,
    ForcedOutage,
    Suspended,
    ForceMajeure,
    InformationUnavailable,
}

impl Category {
    /// Every category, in priority order.
    pub const ALL: [Category; 12] = [
        Category::FullPerformance,
        Category::PartialPerformance,
        Category::TechnicalStandby,
        Category::OutOfElectricalSpecification,
        Category::RequestedShutdown,
        Category::OutOfEnvironmentalSpecification,
        Category::ScheduledMaintenance,
        Category::PlannedCorrectiveAction,
        Category::ForcedOutage,
        Category::Suspended,
        Category::ForceMajeure,
        Category::InformationUnavailable,
    ];

    /// Its name in settings, columns and exports.
    pub fn name(self) -> &'static str {
        match self {
            Category::FullPerformance => "full_performance",
            Category::PartialPerformance => "partial_performance",
            Category::TechnicalStandby => "technical_standby",
            Category::OutOfElectricalSpecification => "out_of_electrical_specification",
            Category::RequestedShutdown => "requested_shutdown",
            Category::OutOfEnvironmentalSpecification => "out_of_environmental_specification",
            Category::ScheduledMaintenance => "scheduled_maintenance",
            Category::PlannedCorrectiveAction => "planned_corrective_action",
            Category::ForcedOutage => "forced_outage",
            Category::Suspended => "suspended",
            Category::ForceMajeure => "force_majeure",
            Category::InformationUnavailable => "information_unavailable",
        }
    }

    fn from_name(name: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Its place in [`Category::ALL`].
    pub fn index(self) -> usize {
        Category::ALL
            .iter()
            .position(|c| *c == self)
            .expect("every category is listed")
    }

    /// The time-based availability's default view (IEC 61400-26-1, its operative and
    /// non-operative categories): time the turbine was available (operative: generating, or
    /// able to and held back by the wind, the grid or its owner)…
    fn available_by_default(self) -> bool {
        self <= Category::OutOfEnvironmentalSpecification
    }

    /// …or not (non-operative: maintenance, repair, a fault, suspended). Force majeure and
    /// information unavailable count for neither.
    fn unavailable_by_default(self) -> bool {
        (Category::ScheduledMaintenance..=Category::Suspended).contains(&self)
    }
}

/// A status value as settings name it: an integer code (`6`) or a text (`"fault"`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(untagged)]
pub enum Status {
    Code(i64),
    Text(String),
}

/// Read by hand so a value that is neither says so (`1.5 is not a status value: …`), where an
/// untagged enum says only that no variant matched.
impl<'de> serde::Deserialize<'de> for Status {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        const WHAT: &str = "a status value: an integer code (6) or a text (\"fault\")";
        impl serde::de::Visitor<'_> for V {
            type Value = Status;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Status, E> {
                Ok(Status::Code(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Status, E> {
                i64::try_from(v).map(Status::Code).map_err(|_| {
                    E::custom(format!(
                        "{v} is too large for a status code (at most {})",
                        i64::MAX
                    ))
                })
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Status, E> {
                // `{v:?}`: 6.0 is written 6.0, not 6 (which would read as the example given).
                Err(E::custom(format!(
                    "{v:?} is not {WHAT}; a code is written without a fraction"
                )))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Status, E> {
                Err(E::custom(format!("{v} is not {WHAT}")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Status, E> {
                Ok(Status::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl Status {
    /// A reading's status value, if it has one of a kind a status can be.
    pub fn of(d: &Datum) -> Option<Status> {
        match d {
            Datum::Int(i) => Some(Status::Code(*i)),
            Datum::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                Some(Status::Code(*f as i64))
            }
            Datum::Text(t) => Some(Status::Text(t.to_string())),
            Datum::Bool(b) => Some(Status::Code(i64::from(*b))),
            _ => None,
        }
    }
}

/// Which category each status value stands for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mapping {
    by_value: HashMap<Status, Category>,
}

impl Mapping {
    /// The mapping of `categories` (each with the values that stand for it). A value listed
    /// under two categories stands for the one of higher priority.
    pub fn new(categories: &[(Category, Vec<Status>)]) -> Mapping {
        let mut by_value: HashMap<Status, Category> = HashMap::new();
        for (c, values) in categories {
            for v in values {
                let e = by_value.entry(v.clone()).or_insert(*c);
                *e = (*e).min(*c);
            }
        }
        Mapping { by_value }
    }

    /// The category of a reading whose status is `status`: its mapped one; a value no setting
    /// names, or no status at all, is information unavailable (the state is not known).
    pub fn category(&self, status: Option<&Status>) -> Category {
        status
            .and_then(|s| self.by_value.get(s))
            .copied()
            .unwrap_or(Category::InformationUnavailable)
    }

    /// The values that stand for `c`.
    pub(crate) fn values_of(&self, c: Category) -> Vec<&Status> {
        let mut v: Vec<&Status> = self
            .by_value
            .iter()
            .filter(|(_, k)| **k == c)
            .map(|(s, _)| s)
            .collect();
        v.sort_by_key(|s| match s {
            Status::Code(i) => (0, *i, String::new()),
            Status::Text(t) => (1, 0, t.clone()),
        });
        v
    }
}

/// Readings in each category ([`Category::ALL`]'s order): each reading stands for its sample
/// period. Merged by addition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts(pub [i64; 12]);

impl Counts {
    pub fn add(&mut self, c: Category) {
        self.0[c.index()] += 1;
    }

    pub fn merge(&self, o: &Counts) -> Counts {
        let mut out = *self;
        for (a, b) in out.0.iter_mut().zip(o.0) {
            *a += b;
        }
        out
    }

    pub fn get(&self, c: Category) -> i64 {
        self.0[c.index()]
    }
}

/// Which categories count as available, as unavailable, or for neither (excluded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub available: Vec<Category>,
    pub unavailable: Vec<Category>,
}

impl Default for View {
    /// IEC 61400-26-1's operative against non-operative time; force majeure and information
    /// unavailable excluded.
    fn default() -> Self {
        View {
            available: Category::ALL
                .into_iter()
                .filter(|c| c.available_by_default())
                .collect(),
            unavailable: Category::ALL
                .into_iter()
                .filter(|c| c.unavailable_by_default())
                .collect(),
        }
    }
}

/// A window's time in each category ([`Category::ALL`]'s order), in readings' worth (each reading
/// stands for its sample period; fractional where an annotation moved part of an interval), and
/// the readings expected that never came (time with no data: information unavailable). Merged
/// by addition; also the change an annotation makes ([`crate::core::allocation::moved`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Times {
    pub categories: [f64; 12],
    pub missing: f64,
}

impl Times {
    /// The time of `counts`, and `missing` readings that never came (none below 0).
    pub fn of(counts: &Counts, missing: f64) -> Times {
        Times {
            categories: counts.0.map(|n| n as f64),
            missing: missing.max(0.0),
        }
    }

    /// The time in `c`, the readings that never came counted information unavailable.
    pub fn get(&self, c: Category) -> f64 {
        let n = self.categories[c.index()];
        if c == Category::InformationUnavailable {
            n + self.missing
        } else {
            n
        }
    }

    /// All of it: every category's and the missing.
    pub fn total(&self) -> f64 {
        self.categories.iter().sum::<f64>() + self.missing
    }

    /// The two added: two windows' times merged, or two changes.
    pub fn plus(&self, o: &Times) -> Times {
        let mut out = *self;
        for (a, b) in out.categories.iter_mut().zip(o.categories) {
            *a += b;
        }
        out.missing += o.missing;
        out
    }

    /// A time with `change` made to it ([`crate::core::allocation::moved`]'s): the missing
    /// never below 0.
    pub fn changed(&self, change: &Times) -> Times {
        let mut out = self.plus(change);
        out.missing = out.missing.max(0.0);
        out
    }
}

impl View {
    /// Time-based availability: available time over available and unavailable time (the
    /// readings that never came are information unavailable). None when no time counts either
    /// way.
    pub(crate) fn time_based(&self, t: &Times) -> Option<f64> {
        let sum = |cs: &[Category]| -> f64 { cs.iter().map(|c| t.get(*c)).sum() };
        let (a, u) = (sum(&self.available), sum(&self.unavailable));
        (a + u > 0.0).then(|| a / (a + u))
    }
}

group! {
    /// Availability's settings as an operator writes them (`availability_*`), to be checked.
    pub struct AvailabilitySettings("Availability") {
        /// The declared signal whose values say what a turbine was doing (a status code or text):
        /// each reading is counted, per interval, in the IEC 61400-26-1 information category its
        /// value stands for, and time-based availability follows (docs/stats.md, Availability).
        /// Empty: availability is not kept.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub availability_status_signal: String = String::new(),
        /// IEC 61400-26-1 category to the status values that stand for it, as a table
        /// (full_performance = [1], forced_outage = [6, 7]); a value under two categories takes the
        /// one of higher priority (the standard's order); a value under none, or no status, is
        /// information_unavailable. With a status signal set, at least one value must be mapped.
        pub availability_categories: BTreeMap<String, Vec<Status>> = BTreeMap::new(),
        /// The categories whose time counts as available (default: IEC 61400-26-1's operative ones,
        /// full_performance to out_of_environmental_specification).
        pub availability_available: Vec<String> = category_names(|c| c.available_by_default()),
        /// The categories whose time counts as unavailable (default: the non-operative ones,
        /// scheduled_maintenance to suspended); the categories in neither list (force_majeure,
        /// information_unavailable) count for neither.
        pub availability_unavailable: Vec<String> = category_names(|c| c.unavailable_by_default()),
    }
}

/// The names of the categories `keep` keeps, in the standard's order.
fn category_names(keep: impl Fn(Category) -> bool) -> Vec<String> {
    Category::ALL
        .into_iter()
        .filter(|c| keep(*c))
        .map(|c| c.name().to_string())
        .collect()
}

/// Availability as the checked settings keep it.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The status signal's position among the declared signals.
    pub status: usize,
    /// Which category each of its values stands for.
    pub mapping: Mapping,
    /// Which categories' time counts as available, and which as unavailable.
    pub view: View,
}

impl AvailabilitySettings {
    /// The settings checked against the declared signals (availability is kept in the interval
    /// statistics, so needs `stats_enabled`): None when availability is not kept; else the
    /// setting to blame and what is wrong.
    pub fn check(
        &self,
        signals: &crate::core::signals::Signals,
        stats_enabled: bool,
    ) -> Result<Option<Checked>, SettingError> {
        Ok(self.checked(signals, stats_enabled)?)
    }

    fn checked(
        &self,
        signals: &crate::core::signals::Signals,
        stats_enabled: bool,
    ) -> Result<Option<Checked>, (String, String)> {
        use crate::core::signals::Kind;
        let bad = |s: &str, p: String| Err((s.to_string(), p));
        // Which categories count either way is checked whether or not availability is kept, so
        // that `galewatch settings` refuses what `run` would once it is.
        let view = self.view()?;
        if self.availability_status_signal.is_empty() {
            if !self.availability_categories.is_empty() {
                return bad(
                    "availability_categories",
                    "is set but availability_status_signal is empty: name the signal whose values the categories map".into(),
                );
            }
            return Ok(None);
        }
        if !stats_enabled {
            return bad(
                "availability_status_signal",
                "availability is kept in the interval statistics, which stats_enabled = false turns off".into(),
            );
        }
        let Some(status) = signals.position(&self.availability_status_signal) else {
            return bad(
                "availability_status_signal",
                format!(
                    "{:?} is not a declared signal",
                    self.availability_status_signal
                ),
            );
        };
        let kind = signals.get(status).kind;
        if kind == Kind::Boolean || signals.get(status).angle {
            return bad(
                "availability_status_signal",
                format!(
                    "{} is a {}: a status is a code or a text",
                    self.availability_status_signal,
                    if kind == Kind::Boolean {
                        "boolean"
                    } else {
                        "direction (angle = true)"
                    }
                ),
            );
        }
        let mut mapped = Vec::with_capacity(self.availability_categories.len());
        for (name, values) in &self.availability_categories {
            let setting = format!("availability_categories.{name}");
            let c = category_named(setting.clone(), name)?;
            self.check_values(&setting, values, signals.get(status))?;
            mapped.push((c, values.clone()));
        }
        if mapped.iter().all(|(_, values)| values.is_empty()) {
            return bad(
                "availability_categories",
                format!(
                    "maps no value of {}: every reading would be information unavailable; map its values to categories (forced_outage = [6])",
                    self.availability_status_signal
                ),
            );
        }
        if view.available.is_empty() && view.unavailable.is_empty() {
            return bad(
                "availability_available",
                "and availability_unavailable are both empty: no time would count either way"
                    .into(),
            );
        }
        Ok(Some(Checked {
            status,
            mapping: Mapping::new(&mapped),
            view,
        }))
    }

    /// The values one category (`setting`) maps: each of the status signal's kind, no text
    /// longer than its `max_bytes` or holding a NUL (no reading could carry it).
    fn check_values(
        &self,
        setting: &str,
        values: &[Status],
        signal: &crate::core::signals::Signal,
    ) -> Result<(), (String, String)> {
        use crate::core::signals::Kind;
        let bad = |p: String| Err((setting.to_string(), p));
        let kind = signal.kind;
        for v in values {
            let fits = matches!(
                (kind, v),
                (Kind::Text, Status::Text(_)) | (Kind::Integer | Kind::Float, Status::Code(_))
            );
            if !fits {
                return bad(format!(
                    "{} cannot be a value of {} ({})",
                    match v {
                        Status::Code(c) => format!("the code {c}"),
                        Status::Text(t) => format!("the text {t:?}"),
                    },
                    self.availability_status_signal,
                    kind.as_str()
                ));
            }
        }
        let longest = signal.max_bytes;
        if let Some(Status::Text(t)) = values
            .iter()
            .find(|v| matches!(v, Status::Text(t) if t.len() > longest))
        {
            return bad(format!(
                "the text {t:?} is {} bytes, longer than {}'s max_bytes ({longest}): no \
                 reading can carry it",
                t.len(),
                self.availability_status_signal
            ));
        }
        if let Some(Status::Text(t)) = values
            .iter()
            .find(|v| matches!(v, Status::Text(t) if t.contains('\0')))
        {
            return bad(format!(
                "the text {t:?} holds a NUL byte, which no stored reading can hold \
                 (PostgreSQL's text cannot)"
            ));
        }
        Ok(())
    }

    /// Which categories count as available and which as unavailable: known names, none in
    /// both, none twice.
    fn view(&self) -> Result<View, (String, String)> {
        let bad = |s: &str, p: String| Err((s.to_string(), p));
        let view_of = |setting: &str, list: &[String]| -> Result<Vec<Category>, (String, String)> {
            list.iter()
                .map(|n| category_named(setting.to_string(), n))
                .collect()
        };
        let view = View {
            available: view_of("availability_available", &self.availability_available)?,
            unavailable: view_of("availability_unavailable", &self.availability_unavailable)?,
        };
        if let Some(c) = view.available.iter().find(|c| view.unavailable.contains(c)) {
            return bad(
                "availability_unavailable",
                format!(
                    "{} is also in availability_available: time is one or the other",
                    c.name()
                ),
            );
        }
        for (setting, list) in [
            ("availability_available", &view.available),
            ("availability_unavailable", &view.unavailable),
        ] {
            if let Some(c) = list
                .iter()
                .enumerate()
                .find(|(i, c)| list[..*i].contains(c))
            {
                return bad(setting, format!("lists {} twice", c.1.name()));
            }
        }
        Ok(view)
    }
}

/// The category named `n`, else the setting to blame and the names there are.
fn category_named(setting: String, n: &str) -> Result<Category, (String, String)> {
    Category::from_name(n).ok_or_else(|| {
        let names: Vec<&str> = Category::ALL.iter().map(|c| c.name()).collect();
        (
            setting,
            format!(
                "{n:?} is not one of IEC 61400-26-1's categories: {}",
                names.join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each mistake names the setting to blame: a status that is a boolean, an angle or not
    /// declared, an unknown category, a value of the wrong type, a category in both lists or
    /// twice in one, and both lists empty.
    #[test]
    fn availability_settings_name_what_is_wrong() {
        use crate::core::signals::{Kind, SignalSetting, Signals};
        let mut list = SignalSetting::defaults();
        list.push(SignalSetting::new("status_code", Kind::Integer));
        list.push(SignalSetting::new("running", Kind::Boolean));
        list.push(SignalSetting::new("mode", Kind::Text));
        let mut dir = SignalSetting::new("wind_dir", Kind::Float);
        dir.angle = true;
        list.push(dir);
        let signals = Signals::new(&list).unwrap();
        let names = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (avail, unavail) = (names(&["full_performance"]), names(&["forced_outage"]));
        let cats = vec![("full_performance".to_string(), vec![Status::Code(1)])];
        let check = |status: &str, cats: &[(String, Vec<Status>)], a: &[String], u: &[String]| {
            AvailabilitySettings {
                availability_status_signal: status.into(),
                availability_categories: cats.iter().cloned().collect(),
                availability_available: a.to_vec(),
                availability_unavailable: u.to_vec(),
            }
            .checked(&signals, true)
        };
        assert!(check("status_code", &cats, &avail, &unavail)
            .unwrap()
            .is_some());
        let err = |r: Result<Option<Checked>, (String, String)>| r.unwrap_err();
        for (status, setting, says) in [
            ("running", "availability_status_signal", "is a boolean"),
            ("wind_dir", "availability_status_signal", "direction"),
            (
                "nope",
                "availability_status_signal",
                "not a declared signal",
            ),
        ] {
            let (s, p) = err(check(status, &cats, &avail, &unavail));
            assert_eq!(s, setting);
            assert!(p.contains(says), "{p}");
        }
        let text = vec![(
            "full_performance".to_string(),
            vec![Status::Text("run".into())],
        )];
        assert!(err(check("status_code", &text, &avail, &unavail))
            .1
            .contains("cannot be a value"));
        // A text with a NUL byte: no reading can carry it, and the statistics' SQL cannot
        // bind it (it failed every rebuild once).
        let nul = vec![(
            "full_performance".to_string(),
            vec![Status::Text("run".into()), Status::Text("r\0un".into())],
        )];
        let (s, p) = err(check("mode", &nul, &avail, &unavail));
        assert_eq!(s, "availability_categories.full_performance");
        assert!(p.contains("NUL"), "{p}");
        // Longer than the signal takes (256 bytes by default): it could never match.
        let long = vec![(
            "forced_outage".to_string(),
            vec![Status::Text("x".repeat(257))],
        )];
        let (s, p) = err(check("mode", &long, &avail, &unavail));
        assert_eq!(s, "availability_categories.forced_outage");
        assert!(p.contains("max_bytes (256)"), "{p}");
        let unknown = vec![("running_fine".to_string(), vec![Status::Code(1)])];
        assert!(err(check("status_code", &unknown, &avail, &unavail))
            .1
            .contains("not one of"));
        assert!(err(check("status_code", &cats, &avail, &avail))
            .1
            .contains("also in"));
        let twice = names(&["forced_outage", "forced_outage"]);
        assert_eq!(
            err(check("status_code", &cats, &avail, &twice)),
            (
                "availability_unavailable".into(),
                "lists forced_outage twice".into()
            )
        );
        assert_eq!(
            err(check("status_code", &cats, &[], &[])).0,
            "availability_available"
        );
        // A status with nothing mapped (no category, or only empty lists) would count every
        // reading as information unavailable: refused, not kept silently.
        let empty = [("forced_outage".to_string(), vec![])];
        for cats in [&[][..], &empty[..]] {
            let (s, p) = err(check("status_code", cats, &avail, &unavail));
            assert_eq!(s, "availability_categories");
            assert!(p.contains("maps no value of status_code"), "{p}");
        }
    }

    #[test]
    fn a_value_in_two_categories_takes_the_higher_priority() {
        let m = Mapping::new(&[
            (
                Category::ForcedOutage,
                vec![Status::Code(7), Status::Code(9)],
            ),
            (Category::FullPerformance, vec![Status::Code(1)]),
            (Category::ScheduledMaintenance, vec![Status::Code(9)]),
        ]);
        assert_eq!(
            m.category(Some(&Status::Code(1))),
            Category::FullPerformance
        );
        assert_eq!(
            m.category(Some(&Status::Code(9))),
            Category::ScheduledMaintenance
        );
        assert_eq!(
            m.category(Some(&Status::Code(8))),
            Category::InformationUnavailable
        );
        assert_eq!(m.category(None), Category::InformationUnavailable);
        assert_eq!(m.values_of(Category::ForcedOutage), [&Status::Code(7)]);
    }

    #[test]
    fn statuses_are_read_from_any_value_that_can_be_one() {
        assert_eq!(Status::of(&Datum::Int(3)), Some(Status::Code(3)));
        assert_eq!(Status::of(&Datum::Float(3.0)), Some(Status::Code(3)));
        assert_eq!(Status::of(&Datum::Float(3.5)), None);
        assert_eq!(
            Status::of(&Datum::Text("run".into())),
            Some(Status::Text("run".into()))
        );
        assert_eq!(Status::of(&Datum::Null), None);
    }

    #[test]
    fn time_based_availability_counts_operative_against_non_operative_time() {
        let mut c = Counts::default();
        for _ in 0..90 {
            c.add(Category::FullPerformance);
        }
        for _ in 0..5 {
            c.add(Category::OutOfEnvironmentalSpecification);
        }
        for _ in 0..5 {
            c.add(Category::ForcedOutage);
        }
        for _ in 0..20 {
            c.add(Category::ForceMajeure);
        }
        let v = View::default();
        assert_eq!(
            v.time_based(&Times::of(&c, 30.0)),
            Some(0.95),
            "force majeure and missing time excluded"
        );
        let strict = View {
            available: vec![Category::FullPerformance],
            unavailable: Category::ALL[1..].to_vec(),
        };
        // 90 of 90 + 5 + 5 + 20 + 30 (the missing time is information unavailable).
        assert_eq!(strict.time_based(&Times::of(&c, 30.0)), Some(0.6));
        assert_eq!(v.time_based(&Times::default()), None);
        assert_eq!(c.merge(&c).get(Category::ForcedOutage), 10);
    }

    #[test]
    fn the_order_is_the_standards() {
        assert!(Category::FullPerformance.available_by_default());
        assert!(Category::OutOfEnvironmentalSpecification.available_by_default());
        assert!(!Category::ScheduledMaintenance.available_by_default());
        assert!(Category::Suspended.unavailable_by_default());
        assert!(!Category::ForceMajeure.unavailable_by_default());
        assert!(!Category::InformationUnavailable.available_by_default());
        for c in Category::ALL {
            assert_eq!(Category::from_name(c.name()), Some(c));
        }
    }
}
