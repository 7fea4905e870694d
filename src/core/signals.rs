//! Signals: the measured quantities a reading carries, as the settings declare them (column,
//! type, bounds, unit, place in the payload), and the values one reading holds for them.
//!
//! The list is fixed for the life of a process. Every stage reads it: decoding (where each value
//! is and what it may be), the write path (staging columns, COPY types, the comparison that
//! tells a duplicate from a collision), the schema (`galewatch migrate` adds a column per new
//! signal), the panel and the simulator.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::core::setting::{group, SettingError};

/// A signal's type, and so its column's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// `double precision`: JSON numbers, integers accepted.
    Float,
    /// `bigint`: JSON integers (and numbers with no fraction, `12.0`, `1.2e1`: another spelling).
    Integer,
    /// `boolean`: JSON `true` / `false`.
    Boolean,
    /// `text`: JSON strings (status codes, modes).
    Text,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Float => "float",
            Kind::Integer => "integer",
            Kind::Boolean => "boolean",
            Kind::Text => "text",
        }
    }

    /// The column type, as `information_schema.columns.data_type` spells it.
    pub(crate) fn sql_type(self) -> &'static str {
        match self {
            Kind::Float => "double precision",
            Kind::Integer => "bigint",
            Kind::Boolean => "boolean",
            Kind::Text => "text",
        }
    }

    /// The element type for `unnest($n::…[])` and casts.
    pub(crate) fn cast(self) -> &'static str {
        match self {
            Kind::Float => "float8",
            Kind::Integer => "int8",
            Kind::Boolean => "bool",
            Kind::Text => "text",
        }
    }

    /// Whether a value of this type can show a frozen sensor by holding still: a measured
    /// (float) one can; an integer one (a status code, a counter) holds one value by nature — a
    /// turbine running all interval keeps status 1 — so it is never judged stuck.
    pub fn freezes(self) -> bool {
        self == Kind::Float
    }

    /// Charted by the panel (a line per interval) rather than listed.
    pub fn is_numeric(self) -> bool {
        matches!(self, Kind::Float | Kind::Integer)
    }
}

/// One signal as an operator writes it under `[[signals]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalSetting {
    /// The column in `readings` (and `quarantine`, twice): lower case letters, digits and `_`.
    pub name: String,
    #[serde(rename = "type", default = "default_kind")]
    pub kind: Kind,
    /// A reading without it (absent or null) is `malformed`; an optional one is stored NULL.
    #[serde(default)]
    pub required: bool,
    /// Bounds for numbers: a value outside them is `invalid_value`. Unset: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// For text: the longest value accepted, in bytes (default 256); longer is `invalid_value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
    /// Shown by the panel beside the name ("kW").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unit: String,
    /// Where the value is in a reading object, a JSON Pointer (RFC 6901). Default: `/{name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// A direction in degrees (nacelle position, wind direction, yaw error): its interval
    /// statistics average it as a vector (docs/stats.md). Numbers only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub angle: bool,
    /// Soft bounds for numbers: a value outside them is stored, and counted as implausible in
    /// its interval (the hard `min`/`max` reject). Unset: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plausible_min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plausible_max: Option<f64>,
    /// The signal's IEC 61400-25 name (`WTUR.W`, `WMET.HorWdSpd`, `WNAC.Dir`), for exports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iec_name: Option<String>,
    /// Whether a frozen value flags it `stuck` (default: yes, for a float). false for a signal
    /// that rests by nature: a pitch at its stop, a nacelle that does not yaw (docs/stats.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck: Option<bool>,
    /// The least values of a run (in a row, across intervals) that flag it stuck (default:
    /// stats_stuck_min_readings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck_min_readings: Option<i64>,
    /// The widest step between two values of one run, a last digit that flickers (default 0:
    /// equal values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck_tolerance: Option<f64>,
    /// Turbine-id prefixes expected to send it (a met mast's signals: ["MET-"]); default: every
    /// turbine. `absent` is judged only for these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent_by: Vec<String>,
}

fn default_kind() -> Kind {
    Kind::Float
}

impl SignalSetting {
    /// An optional signal of `kind`, unbounded, without a unit, found by its name.
    pub fn new(name: &str, kind: Kind) -> Self {
        SignalSetting {
            name: name.into(),
            kind,
            required: false,
            min: None,
            max: None,
            max_bytes: None,
            unit: String::new(),
            pointer: None,
            angle: false,
            plausible_min: None,
            plausible_max: None,
            iec_name: None,
            stuck: None,
            stuck_min_readings: None,
            stuck_tolerance: None,
            sent_by: Vec::new(),
        }
    }

    fn float(name: &str, required: bool, min: f64, max: f64, unit: &str) -> Self {
        SignalSetting {
            required,
            min: Some(min),
            max: Some(max),
            unit: unit.into(),
            ..SignalSetting::new(name, Kind::Float)
        }
    }

    /// The three signals Galewatch has always known, with their bounds and their IEC 61400-25-2
    /// names (logical node and data: the turbine's total active power `WTUR.W`, the met
    /// mast's horizontal wind speed `WMET.HorWdSpd`, the rotor's speed `WROT.RotSpd`): the
    /// default list.
    pub fn defaults() -> Vec<SignalSetting> {
        let iec = |s: SignalSetting, name: &str| SignalSetting {
            iec_name: Some(name.into()),
            ..s
        };
        vec![
            iec(
                SignalSetting::float("power_kw", true, -1000.0, 50_000.0, "kW"),
                "WTUR.W",
            ),
            iec(
                SignalSetting::float("wind_speed_ms", false, 0.0, 120.0, "m/s"),
                "WMET.HorWdSpd",
            ),
            iec(
                SignalSetting::float("rotor_rpm", false, 0.0, 200.0, "rpm"),
                "WROT.RotSpd",
            ),
        ]
    }
}

/// Longest text value by default, in bytes.
const DEFAULT_TEXT_BYTES: usize = 256;

/// Most signals a list may declare. Each costs three columns in `quarantine`; PostgreSQL allows
/// 1,600 columns in a table.
const MAX_SIGNALS: usize = 200;

/// Names that would clash with Galewatch's own columns in `readings` or `quarantine`.
const RESERVED: &[&str] = &[
    "turbine_id",
    "recorded_at",
    "id",
    "reason",
    "topic",
    "received_at",
    "values_sha256",
    "seq",
];

/// A checked signal.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    pub name: String,
    pub kind: Kind,
    pub required: bool,
    /// Bounds for a number (±∞ when unset).
    pub min: f64,
    pub max: f64,
    /// For text: the longest value accepted.
    pub max_bytes: usize,
    pub unit: String,
    /// The pointer's reference tokens, unescaped (`/values/ActivePower` → `values`, `ActivePower`).
    pub pointer: Vec<String>,
    /// A direction in degrees, averaged as a vector.
    pub angle: bool,
    /// Soft bounds (±∞ when unset): outside them a value is implausible, and stored.
    pub plausible_min: f64,
    pub plausible_max: f64,
    /// The IEC 61400-25 name, when declared.
    pub iec_name: Option<String>,
    /// How its flags are judged: the frozen-sensor rule and the turbines expected to send it.
    pub rules: crate::core::quality::Rules,
}

impl Signal {
    /// One signal's setting checked: else the field to blame and what is wrong.
    fn checked(s: &SignalSetting) -> Result<Signal, (&'static str, String)> {
        check_name(&s.name).map_err(|p| ("name", p))?;
        let numeric = s.kind.is_numeric();
        if !numeric && (s.min.is_some() || s.max.is_some()) {
            return Err((
                if s.min.is_some() { "min" } else { "max" },
                format!("bounds are for numbers; {} is {}", s.name, s.kind.as_str()),
            ));
        }
        if s.kind != Kind::Text && s.max_bytes.is_some() {
            return Err((
                "max_bytes",
                format!("is for text; {} is {}", s.name, s.kind.as_str()),
            ));
        }
        let (min, max) = range(("min", s.min), ("max", s.max))?;
        let max_bytes = s.max_bytes.unwrap_or(DEFAULT_TEXT_BYTES);
        if max_bytes == 0 || max_bytes > 1024 * 1024 {
            return Err(("max_bytes", "must be 1 to 1048576".into()));
        }
        let pointer = match &s.pointer {
            None => vec![s.name.clone()],
            Some(p) => parse_pointer(p).map_err(|e| ("pointer", e))?,
        };
        if pointer.is_empty() {
            return Err((
                "pointer",
                "\"\" is the whole reading, not a value in it".into(),
            ));
        }
        if !numeric {
            for (field, set) in [
                ("angle", s.angle),
                ("plausible_min", s.plausible_min.is_some()),
                ("plausible_max", s.plausible_max.is_some()),
            ] {
                if set {
                    return Err((
                        field,
                        format!("is for numbers; {} is {}", s.name, s.kind.as_str()),
                    ));
                }
            }
        }
        let (plausible_min, plausible_max) = range(
            ("plausible_min", s.plausible_min),
            ("plausible_max", s.plausible_max),
        )?;
        if let Some(n) = &s.iec_name {
            check_iec_name(n).map_err(|p| ("iec_name", p))?;
        }
        let rules = crate::core::quality::Rules::checked(
            (s.kind.as_str(), s.kind.freezes()),
            s.stuck,
            s.stuck_min_readings,
            s.stuck_tolerance,
            &s.sent_by,
        )?;
        Ok(Signal {
            name: s.name.clone(),
            kind: s.kind,
            required: s.required,
            min,
            max,
            max_bytes,
            unit: s.unit.clone(),
            pointer,
            angle: s.angle,
            plausible_min,
            plausible_max,
            iec_name: s.iec_name.clone(),
            rules,
        })
    }

    /// Whether a number lies outside the soft bounds.
    pub fn implausible(&self, x: f64) -> bool {
        x < self.plausible_min || x > self.plausible_max
    }

    /// The column holding this signal, quoted for SQL.
    pub fn column(&self) -> String {
        format!("\"{}\"", self.name)
    }

    /// The quarantine column holding the stored reading's value for a collision.
    pub(crate) fn existing_column(&self) -> String {
        format!("\"existing_{}\"", self.name)
    }

    /// The name with its unit, for a chart's title or a table's header.
    pub fn label(&self) -> String {
        if self.unit.is_empty() {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.unit)
        }
    }
}

/// The declared signals, in order; cheap to clone.
#[derive(Debug, Clone, PartialEq)]
pub struct Signals {
    list: Arc<[Signal]>,
    /// Indexes of `list` by name, for the order-independent digest.
    by_name: Arc<[usize]>,
}

group! {
    /// The signals a reading carries, as an operator declares them.
    pub struct SignalSettings("Signals") {
        /// The values a reading carries, one [[signals]] table each, in the order the panel shows
        /// them: name (the column in readings), type (float, integer, boolean or text), required (a
        /// reading without it is rejected malformed), min and max (outside them: invalid_value),
        /// max_bytes (text, default 256), unit (shown by the panel), pointer (default /{name}), and
        /// more (angle, plausible bounds, iec_name, the quality rules stuck, stuck_min_readings,
        /// stuck_tolerance, sent_by: docs/signals.md). `galewatch migrate` adds a column for a new signal and refuses (exit 2) a type change or
        /// a required signal removed (docs/signals.md). GALEWATCH_SIGNALS sets the whole list.
        pub signals: Vec<SignalSetting> = SignalSetting::defaults(),
        /// The old way to bound the default signal power_kw (from below), still read when signals
        /// is left at its default (an error beside a declared list: give min and max there).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub power_kw_min: Option<f64> = None,
        /// The old way to bound power_kw from above (as power_kw_min).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub power_kw_max: Option<f64> = None,
        /// The old way to bound wind_speed_ms from below (as power_kw_min).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub wind_speed_ms_min: Option<f64> = None,
        /// The old way to bound wind_speed_ms from above (as power_kw_min).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub wind_speed_ms_max: Option<f64> = None,
        /// The old way to bound rotor_rpm from below (as power_kw_min).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub rotor_rpm_min: Option<f64> = None,
        /// The old way to bound rotor_rpm from above (as power_kw_min).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub rotor_rpm_max: Option<f64> = None,
    }
}

impl SignalSettings {
    /// The declared signals, checked; the old `power_kw_min`-style bounds applied to the
    /// default list, when `signals` was not given (`given`: in a file or a variable, even as the
    /// default list, the bounds belong there).
    pub fn checked(&self, given: bool) -> Result<Signals, SettingError> {
        let bounds = |signal, setting, min, max| LegacyBounds {
            signal,
            setting,
            min,
            max,
        };
        let legacy = [
            bounds(
                "power_kw",
                "power_kw_min",
                self.power_kw_min,
                self.power_kw_max,
            ),
            bounds(
                "wind_speed_ms",
                "wind_speed_ms_min",
                self.wind_speed_ms_min,
                self.wind_speed_ms_max,
            ),
            bounds(
                "rotor_rpm",
                "rotor_rpm_min",
                self.rotor_rpm_min,
                self.rotor_rpm_max,
            ),
        ];
        Signals::declared(&self.signals, &legacy, given)
    }
}

/// An older setting that bounds one of the default signals (`power_kw_min`, …): `setting` is the
/// `_min` one, named in an error about either.
#[derive(Debug, Clone, Copy)]
pub struct LegacyBounds {
    pub signal: &'static str,
    pub setting: &'static str,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Signals {
    /// The declared signals checked, with older bounds applied to the default list (they are
    /// an error beside a list of one's own, `given`: bounds belong there).
    pub fn declared(
        list: &[SignalSetting],
        legacy: &[LegacyBounds],
        given: bool,
    ) -> Result<Signals, SettingError> {
        let mut list = list.to_vec();
        for b in legacy {
            if b.min.is_none() && b.max.is_none() {
                continue;
            }
            // The bound given is the one named (the `_max` one when only it is).
            let named = if b.min.is_none() {
                b.setting.replace("_min", "_max")
            } else {
                b.setting.to_string()
            };
            let err = |problem: String| SettingError::new(named.clone(), problem);
            if given || list != SignalSetting::defaults() {
                return Err(err(format!(
                    "bounds the default {}; with [[signals]] declared, give min and max there",
                    b.signal
                )));
            }
            let s = list
                .iter_mut()
                .find(|s| s.name == b.signal)
                .expect("a default signal");
            s.min = b.min.or(s.min);
            s.max = b.max.or(s.max);
            let (lo, hi) = (s.min.unwrap_or_default(), s.max.unwrap_or_default());
            if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
                // The bound at fault: a non-finite one, else the one given (the other default).
                let max_at_fault = lo.is_finite() && (!hi.is_finite() || b.min.is_none());
                let setting = if max_at_fault {
                    b.setting.replace("_min", "_max")
                } else {
                    b.setting.to_string()
                };
                return Err(SettingError::new(
                    setting,
                    format!("[{lo}, {hi}] is not a range (min ≤ max, both finite)"),
                ));
            }
        }
        Signals::new(&list)
    }

    /// Checks the settings.
    pub fn new(settings: &[SignalSetting]) -> Result<Signals, SettingError> {
        let err = |i: usize, field: &str, problem: String| {
            SettingError::new(format!("signals[{i}].{field}"), problem)
        };
        if settings.is_empty() {
            return Err(SettingError::new(
                "signals",
                "declares no signal: a reading needs at least one",
            ));
        }
        if settings.len() > MAX_SIGNALS {
            return Err(SettingError::new(
                "signals",
                format!("declares {}, more than {MAX_SIGNALS}", settings.len()),
            ));
        }
        let mut list = Vec::with_capacity(settings.len());
        for (i, s) in settings.iter().enumerate() {
            let err = |field: &str, problem: String| err(i, field, problem);
            if settings[..i].iter().any(|o| o.name == s.name) {
                return Err(err("name", format!("{:?} is declared twice", s.name)));
            }
            if let Some(n) = &s.iec_name {
                if settings[..i].iter().any(|o| o.iec_name.as_ref() == Some(n)) {
                    return Err(err("iec_name", format!("{n:?} is declared twice")));
                }
            }
            list.push(Signal::checked(s).map_err(|(field, problem)| err(field, problem))?);
        }
        let mut by_name: Vec<usize> = (0..list.len()).collect();
        by_name.sort_by(|&a, &b| list[a].name.cmp(&list[b].name));
        Ok(Signals {
            list: list.into(),
            by_name: by_name.into(),
        })
    }

    /// One checked signal alone: what is built per signal (its statistics' columns).
    pub fn one(s: Signal) -> Signals {
        Signals {
            list: Arc::from(vec![s]),
            by_name: Arc::from(vec![0]),
        }
    }

    /// Today's three signals.
    pub fn defaults() -> Signals {
        Signals::new(&SignalSetting::defaults()).expect("the default signals are valid")
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Signal> {
        self.list.iter()
    }

    /// The declared signals, in order.
    pub fn as_slice(&self) -> &[Signal] {
        &self.list
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn get(&self, i: usize) -> &Signal {
        &self.list[i]
    }

    /// The index of the signal named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.list.iter().position(|s| s.name == name)
    }

    /// The columns, quoted and comma-separated, each prefixed by `prefix` (`r.`).
    pub fn columns(&self, prefix: &str) -> String {
        self.list
            .iter()
            .map(|s| format!("{prefix}{}", s.column()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Quarantine's `existing_` columns (the stored reading's side), like [`Signals::columns`].
    pub(crate) fn existing_columns(&self, prefix: &str) -> String {
        self.list
            .iter()
            .map(|s| format!("{prefix}{}", s.existing_column()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `a.x IS NOT DISTINCT FROM b.x AND …` over every signal: "same values", NULL equal to NULL.
    pub(crate) fn same_sql(&self, a: &str, b: &str) -> String {
        self.list
            .iter()
            .map(|s| {
                let c = s.column();
                format!("{a}.{c} IS NOT DISTINCT FROM {b}.{c}")
            })
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// The identity of a set of values in `quarantine.values_sha256`: SHA-256 over the non-null
    /// values in name order, each as name, NUL, a type letter and its bytes (a float's IEEE bits
    /// big-endian, with -0 as 0; an integer's big-endian; a boolean's 0/1; a text's UTF-8 and
    /// NUL). A NULL adds nothing, so a signal added later leaves the identity of older rows as
    /// it was. V7 computes the same in SQL for rows stored before it.
    pub fn digest(&self, values: &Values) -> [u8; 32] {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        for &i in self.by_name.iter() {
            let name = self.list[i].name.as_bytes();
            match &values.0[i] {
                Datum::Null => continue,
                Datum::Float(v) => {
                    ctx.update(name);
                    ctx.update(b"\0f");
                    ctx.update(&(v + 0.0).to_bits().to_be_bytes());
                }
                Datum::Int(v) => {
                    ctx.update(name);
                    ctx.update(b"\0i");
                    ctx.update(&v.to_be_bytes());
                }
                Datum::Bool(v) => {
                    ctx.update(name);
                    ctx.update(b"\0b");
                    ctx.update(&[u8::from(*v)]);
                }
                Datum::Text(v) => {
                    ctx.update(name);
                    ctx.update(b"\0t");
                    ctx.update(v.as_bytes());
                    ctx.update(b"\0");
                }
            }
        }
        ctx.finish()
            .as_ref()
            .try_into()
            .expect("SHA-256 is 32 bytes")
    }

    /// The values as a JSON object keyed by name (what `rejected` keeps of a refused reading, and
    /// the panel's API).
    pub(crate) fn to_json(&self, values: &Values) -> serde_json::Map<String, serde_json::Value> {
        self.list
            .iter()
            .zip(values.0.iter())
            .map(|(s, d)| (s.name.clone(), d.to_json()))
            .collect()
    }
}

impl<'a> IntoIterator for &'a Signals {
    type Item = &'a Signal;
    type IntoIter = std::slice::Iter<'a, Signal>;
    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}

/// Two optional bounds as a range (±∞ where unset): each finite, the first not above the second.
fn range(
    (lo_field, lo): (&'static str, Option<f64>),
    (hi_field, hi): (&'static str, Option<f64>),
) -> Result<(f64, f64), (&'static str, String)> {
    for (field, v) in [(lo_field, lo), (hi_field, hi)] {
        if v.is_some_and(|v| !v.is_finite()) {
            return Err((field, "must be a finite number".into()));
        }
    }
    let (lo, hi) = (lo.unwrap_or(f64::NEG_INFINITY), hi.unwrap_or(f64::INFINITY));
    if lo > hi {
        return Err((
            lo_field,
            format!("[{lo}, {hi}] is not a range ({lo_field} ≤ {hi_field})"),
        ));
    }
    Ok((lo, hi))
}

/// An IEC 61400-25 name as exports write it: a logical node and its data, `WTUR.W`,
/// `WMET.HorWdSpd` (letters, digits and `.`, `_`, at most 64 bytes, starting with a letter), so
/// that it can stand as a column name in every format.
fn check_iec_name(n: &str) -> Result<(), String> {
    let ok = n.len() <= 64
        && n.starts_with(|c: char| c.is_ascii_alphabetic())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{n:?} is not an IEC 61400-25 name as exports write it (WTUR.W, WMET.HorWdSpd: letters, digits, '.' and '_', at most 64, starting with a letter)"
        ))
    }
}

/// A column name PostgreSQL takes without surprises (no quoting needed, no case folding): lower
/// case ASCII letters, digits and `_`, starting with a letter, at most 54 bytes (so
/// `existing_{name}` fits PostgreSQL's 63).
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 54
        && name.as_bytes()[0].is_ascii_lowercase()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        return Err(format!(
            "{name:?} is not a column name: use 1 to 54 lower-case letters, digits and _, starting with a letter"
        ));
    }
    if RESERVED.contains(&name) || name.starts_with("existing_") {
        return Err(format!("{name:?} is one of Galewatch's own columns"));
    }
    Ok(())
}

/// Parses a JSON Pointer (RFC 6901) into its reference tokens; `""` is the empty list.
pub fn parse_pointer(p: &str) -> Result<Vec<String>, String> {
    if p.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = p.strip_prefix('/') else {
        return Err(format!(
            "{p:?} is not a JSON Pointer: it must start with / (e.g. /values/ActivePower)"
        ));
    };
    rest.split('/')
        .map(|t| {
            let mut out = String::with_capacity(t.len());
            let mut chars = t.chars();
            while let Some(c) = chars.next() {
                match c {
                    '~' => match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => {
                            return Err(format!(
                                "{p:?} is not a JSON Pointer: ~ must be followed by 0 or 1"
                            ))
                        }
                    },
                    c => out.push(c),
                }
            }
            Ok(out)
        })
        .collect()
}

/// Writes tokens back as a pointer, for messages.
pub(crate) fn pointer_text(tokens: &[String]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// One value of a reading, of its signal's kind, or NULL.
#[derive(Debug, Clone, PartialEq)]
pub enum Datum {
    Null,
    /// Always finite; compared with `==`, so -0 equals 0 as in PostgreSQL.
    Float(f64),
    Int(i64),
    Bool(bool),
    Text(Box<str>),
}

impl Datum {
    pub fn is_null(&self) -> bool {
        matches!(self, Datum::Null)
    }

    /// A number as f64 (for charts and the simulator); None for NULL and non-numbers.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Datum::Float(v) => Some(v),
            Datum::Int(v) => Some(v as f64),
            _ => None,
        }
    }

    pub(crate) fn to_json(&self) -> serde_json::Value {
        match self {
            Datum::Null => serde_json::Value::Null,
            Datum::Float(v) => serde_json::json!(v),
            Datum::Int(v) => serde_json::json!(v),
            Datum::Bool(v) => serde_json::json!(v),
            Datum::Text(v) => serde_json::json!(v),
        }
    }
}

impl fmt::Display for Datum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Datum::Null => f.write_str("—"),
            Datum::Float(v) => write!(f, "{v}"),
            Datum::Int(v) => write!(f, "{v}"),
            Datum::Bool(v) => write!(f, "{v}"),
            Datum::Text(v) => f.write_str(v),
        }
    }
}

/// A reading's values, indexed like its [`Signals`]. Two readings with one key are the same
/// reading exactly when these are equal (NULL equal to NULL, SQL's `IS NOT DISTINCT FROM`).
#[derive(Debug, Clone, PartialEq)]
pub struct Values(pub Box<[Datum]>);

impl Values {
    pub fn get(&self, i: usize) -> &Datum {
        &self.0[i]
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Datum> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_unescape_as_rfc_6901_says() {
        assert_eq!(parse_pointer("").unwrap(), Vec::<String>::new());
        assert_eq!(
            parse_pointer("/values/ActivePower").unwrap(),
            ["values", "ActivePower"]
        );
        assert_eq!(parse_pointer("/a~1b/m~0n").unwrap(), ["a/b", "m~n"]);
        assert_eq!(parse_pointer("/").unwrap(), [""]);
        assert!(parse_pointer("values").is_err());
        assert!(parse_pointer("/a~2").is_err());
        assert!(parse_pointer("/a~").is_err());
        let t = parse_pointer("/a~1b/m~0n/0").unwrap();
        assert_eq!(pointer_text(&t), "/a~1b/m~0n/0");
    }

    #[test]
    fn names_that_clash_or_need_quoting_are_refused() {
        for bad in [
            "",
            "Power",
            "1p",
            "power kw",
            "power-kw",
            "turbine_id",
            "existing_power",
            "values_sha256",
            "ä",
            &"x".repeat(55),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["p", "power_kw", "gearbox_temp_2", &"x".repeat(54)] {
            assert!(check_name(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn bad_lists_are_named() {
        let mut s = SignalSetting::defaults();
        s.push(s[0].clone());
        assert_eq!(Signals::new(&s).unwrap_err().setting, "signals[3].name");
        let mut s = SignalSetting::defaults();
        s[1].kind = Kind::Text;
        assert_eq!(Signals::new(&s).unwrap_err().setting, "signals[1].min");
        let mut s = SignalSetting::defaults();
        s[2].min = Some(5.0);
        s[2].max = Some(1.0);
        assert_eq!(Signals::new(&s).unwrap_err().setting, "signals[2].min");
        let mut s = SignalSetting::defaults();
        s[0].pointer = Some("".into());
        assert_eq!(Signals::new(&s).unwrap_err().setting, "signals[0].pointer");
        assert_eq!(Signals::new(&[]).unwrap_err().setting, "signals");
    }

    #[test]
    fn the_digest_ignores_nulls_order_and_the_sign_of_zero() {
        let three = Signals::defaults();
        let a = Values(vec![Datum::Float(0.0), Datum::Null, Datum::Float(3.0)].into());
        let b = Values(vec![Datum::Float(-0.0), Datum::Null, Datum::Float(3.0)].into());
        assert_eq!(three.digest(&a), three.digest(&b));
        let c = Values(vec![Datum::Float(0.0), Datum::Float(3.0), Datum::Null].into());
        assert_ne!(
            three.digest(&a),
            three.digest(&c),
            "which signal holds 3 matters"
        );
        // A fourth signal, NULL: the identity of the first three's values is unchanged.
        let mut four = SignalSetting::defaults();
        four.push(SignalSetting::new("aaa_status", Kind::Text));
        let four = Signals::new(&four).unwrap();
        let mut d = a.0.to_vec();
        d.push(Datum::Null);
        assert_eq!(four.digest(&Values(d.clone().into())), three.digest(&a));
        d[3] = Datum::Text("run".into());
        assert_ne!(four.digest(&Values(d.into())), three.digest(&a));
    }
}
