use super::*;
use crate::core::outcome::Rejection;
use crate::core::signals::{Datum, Kind as SignalKind, Signals};
use chrono::TimeZone;
use proptest::prelude::*;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 6, 0, 0).unwrap()
}

const T0: u64 = 1_796_104_800_000; // 2026-12-01T06:00:00Z

fn rules() -> Limits {
    Limits::new(Signals::defaults())
}

fn mapping() -> Mapping {
    let mut signals = HashMap::new();
    signals.insert("Power".to_string(), 0);
    signals.insert("Wind".to_string(), 1);
    signals.insert("Rotor".to_string(), 2);
    Mapping {
        turbine: TurbineFrom::Device,
        time: TimeFrom::Metric,
        signals,
        max_metrics: 100,
    }
}

fn double(name: Option<&str>, alias: u64, v: f64, at: Option<u64>) -> Metric {
    let mut m = Metric::new(datatype::DOUBLE, Value::Double(v)).aliased(alias);
    m.name = name.map(str::to_string);
    m.timestamp = at;
    m
}

fn payload(metrics: Vec<Metric>, seq: u64) -> Vec<u8> {
    Payload {
        timestamp: Some(T0),
        metrics,
        seq: Some(seq),
        uuid: None,
    }
    .to_bytes()
}

fn birth_bytes() -> Vec<u8> {
    payload(
        vec![
            double(Some("Power"), 1, 1500.0, Some(T0)),
            double(Some("Wind"), 2, 11.5, Some(T0)),
            double(Some("Status/Temp"), 3, 40.0, Some(T0)),
        ],
        1,
    )
}

fn run(topic: &str, bytes: &[u8], known: Option<&Known>) -> Judged {
    judge(topic, bytes, known, &rules(), &mapping(), now())
}

fn reading(d: &Decoded) -> &crate::core::reading::Reading {
    match d {
        Decoded::Reading(r) => r,
        other => panic!("expected a reading, got {other:?}"),
    }
}

fn rejection(d: &Decoded) -> &Rejection {
    match d {
        Decoded::Rejected(r) => r,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn topics_of_the_namespace() {
    let t = parse_topic("spBv1.0/farm/DDATA/gw1/WTG-01").unwrap();
    assert_eq!(
        (t.group, t.kind, t.node, t.device),
        ("farm", Kind::DData, "gw1", Some("WTG-01"))
    );
    assert_eq!(t.birth_key(), "farm/gw1/WTG-01");
    assert_eq!(t.node_key(), "farm/gw1");
    let n = parse_topic("spBv1.0/farm/NBIRTH/gw1").unwrap();
    assert_eq!((n.kind, n.device), (Kind::NBirth, None));
    assert_eq!(n.birth_key(), "farm/gw1/");
    assert_eq!(
        parse_topic("spBv1.0/STATE/scada").unwrap().kind,
        Kind::State
    );
    for bad in [
        "spBv1.0/farm/DDATA/gw1",       // a device type without a device
        "spBv1.0/farm/NDATA/gw1/extra", // a node type with one
        "spBv1.0/farm/XDATA/gw1",       // no such type
        "spBv1.0//NDATA/gw1",           // an empty level
        "spBv1.0/farm/NDATA/gw1/",      // a trailing one
        "spAv1.0/farm/NDATA/gw1",       // another namespace
    ] {
        assert!(parse_topic(bad).is_err(), "{bad}");
    }
    assert!(is_sparkplug("spBv1.0/farm/NDATA/gw1"));
    assert!(!is_sparkplug("spBv1.0x/farm"));
    assert!(!is_sparkplug("turbines/spBv1.0/readings"));
}

#[test]
fn a_birth_stores_its_aliases_and_lands_its_values() {
    let j = run("spBv1.0/farm/DBIRTH/gw1/WTG-01", &birth_bytes(), None);
    let b = j.birth.expect("a birth");
    assert_eq!(
        (b.group.as_str(), b.node.as_str(), b.device.as_str()),
        ("farm", "gw1", "WTG-01")
    );
    assert_eq!(b.aliases, [1, 2, 3]);
    assert_eq!(
        b.names.iter().collect::<Vec<_>>(),
        ["Power", "Wind", "Status/Temp"]
    );
    assert_eq!(b.datatypes, [10, 10, 10]);
    assert_eq!(j.items.len(), 1);
    let r = reading(&j.items[0]);
    assert_eq!(&*r.turbine_id, "WTG-01");
    assert_eq!(r.recorded_at.timestamp_millis() as u64, T0);
    assert_eq!(
        r.values.0.as_ref(),
        [Datum::Float(1500.0), Datum::Float(11.5), Datum::Null]
    );
    assert_eq!(j.ignored, 1, "Status/Temp feeds no signal");
    assert_eq!(j.seq, Some(1));
}

#[test]
fn data_by_alias_is_decoded_with_the_birth_and_grouped_by_instant() {
    let known = run("spBv1.0/farm/DBIRTH/gw1/WTG-01", &birth_bytes(), None)
        .birth
        .unwrap()
        .known(&mapping())
        .unwrap();
    let bytes = payload(
        vec![
            double(None, 1, 1600.0, Some(T0 + 2000)),
            double(None, 2, 12.0, Some(T0 + 2000)),
            double(None, 1, 1700.0, Some(T0 + 4000)),
            double(None, 3, 41.0, Some(T0 + 4000)),
        ],
        2,
    );
    let j = run("spBv1.0/farm/DDATA/gw1/WTG-01", &bytes, Some(&known));
    assert!(j.birth.is_none() && !j.unknown_alias);
    assert_eq!(j.items.len(), 2);
    let (a, b) = (reading(&j.items[0]), reading(&j.items[1]));
    assert_eq!(a.recorded_at.timestamp_millis() as u64, T0 + 2000);
    assert_eq!(a.values.0[..2], [Datum::Float(1600.0), Datum::Float(12.0)]);
    assert_eq!(b.values.0[..2], [Datum::Float(1700.0), Datum::Null]);
    assert_eq!(j.ignored, 1);
}

#[test]
fn an_alias_no_birth_explains_is_not_guessed() {
    let bytes = payload(vec![double(None, 1, 1600.0, Some(T0))], 2);
    let j = run("spBv1.0/farm/DDATA/gw1/WTG-01", &bytes, None);
    assert!(j.unknown_alias);
    assert_eq!(j.items.len(), 1);
    let r = rejection(&j.items[0]);
    assert_eq!((r.reason, r.element), (RejectReason::UnknownAlias, None));
    assert!(r.detail.contains("alias 1"), "{}", r.detail);
    // A birth that does not name alias 9.
    let known = run("spBv1.0/farm/DBIRTH/gw1/WTG-01", &birth_bytes(), None)
        .birth
        .unwrap()
        .known(&mapping())
        .unwrap();
    let bytes = payload(vec![double(None, 9, 1.0, Some(T0))], 2);
    let j = run("spBv1.0/farm/DDATA/gw1/WTG-01", &bytes, Some(&known));
    assert!(j.unknown_alias);
    assert_eq!(rejection(&j.items[0]).reason, RejectReason::UnknownAlias);
    // A metric by name needs no birth.
    let bytes = payload(vec![double(Some("Power"), 1, 5.0, Some(T0))], 2);
    let j = run("spBv1.0/farm/DDATA/gw1/WTG-01", &bytes, None);
    assert!(!j.unknown_alias);
    assert_eq!(reading(&j.items[0]).values.0[0], Datum::Float(5.0));
}

#[test]
fn levels_that_name_no_turbine_are_ignored_not_rejected() {
    // Device mode: the node's own metrics feed nothing, even with unknown aliases.
    let bytes = payload(vec![double(None, 77, 1.0, Some(T0))], 3);
    let j = run("spBv1.0/farm/NDATA/gw1", &bytes, None);
    assert!(j.items.is_empty() && !j.unknown_alias);
    assert_eq!(j.ignored, 1);
    // Edge-node mode: the node names the turbine; group/edge_node prefixes the group.
    let mut m = mapping();
    m.turbine = TurbineFrom::GroupEdgeNode;
    let bytes = payload(vec![double(Some("Power"), 1, 1.0, Some(T0))], 3);
    let j = judge("spBv1.0/farm/NDATA/gw1", &bytes, None, &rules(), &m, now());
    assert_eq!(&*reading(&j.items[0]).turbine_id, "farm/gw1");
    let j = judge(
        "spBv1.0/farm/DDATA/gw1/d",
        &bytes,
        None,
        &rules(),
        &m,
        now(),
    );
    assert!(j.items.is_empty());
    // Deaths carry no readings.
    let j = run("spBv1.0/farm/DDEATH/gw1/WTG-01", &payload(vec![], 4), None);
    assert!(j.items.is_empty() && j.decoded);
}

#[test]
fn values_are_judged_as_json_values_are() {
    let bytes = |m: Metric| payload(vec![m.at(T0)], 1);
    let power = |m: Metric| m.named("Power");
    // A 32-bit float is its shortest decimal.
    let j = run(
        "spBv1.0/f/DDATA/n/d",
        &bytes(power(Metric::new(datatype::FLOAT, Value::Float(12.3)))),
        None,
    );
    assert_eq!(reading(&j.items[0]).values.0[0], Datum::Float(12.3));
    // Signed 8-bit -1, sign-extended or not.
    for v in [0xFFu32, 0xFFFF_FFFF] {
        let j = run(
            "spBv1.0/f/DDATA/n/d",
            &bytes(power(Metric::new(datatype::INT8, Value::Int(v)))),
            None,
        );
        assert_eq!(
            reading(&j.items[0]).values.0[0],
            Datum::Float(-1.0),
            "{v:#x}"
        );
    }
    let j = run(
        "spBv1.0/f/DDATA/n/d",
        &bytes(power(Metric::new(datatype::INT64, Value::Long(u64::MAX)))),
        None,
    );
    assert_eq!(reading(&j.items[0]).values.0[0], Datum::Float(-1.0));
    // Out of bounds: invalid_value, named like a JSON field.
    let j = run(
        "spBv1.0/f/DDATA/n/d",
        &bytes(power(Metric::new(datatype::DOUBLE, Value::Double(1e9)))),
        None,
    );
    let r = rejection(&j.items[0]);
    assert_eq!(r.reason, RejectReason::InvalidValue);
    assert!(
        r.detail.contains("power_kw (metric \"Power\")"),
        "{}",
        r.detail
    );
    // NaN, a string for a number, bytes: malformed.
    for m in [
        Metric::new(datatype::DOUBLE, Value::Double(f64::NAN)),
        Metric::new(datatype::STRING, Value::String("high".into())),
        Metric::new(17, Value::Bytes(vec![1, 2])),
        Metric {
            datatype: Some(16),
            ..Metric::default()
        },
    ] {
        let j = run("spBv1.0/f/DDATA/n/d", &bytes(power(m.clone())), None);
        assert_eq!(
            rejection(&j.items[0]).reason,
            RejectReason::Malformed,
            "{m:?}"
        );
    }
    // An explicit null of a required signal is missing.
    let mut null = power(Metric::new(datatype::DOUBLE, Value::Double(1.0)));
    null.is_null = Some(true);
    let j = run("spBv1.0/f/DDATA/n/d", &bytes(null), None);
    let r = rejection(&j.items[0]);
    assert_eq!(r.reason, RejectReason::Malformed);
    assert!(r.detail.contains("missing"), "{}", r.detail);
}

#[test]
fn instants_come_from_the_metric_or_the_payload() {
    let bytes = payload(
        vec![
            double(Some("Power"), 1, 1.0, Some(T0 + 500)),
            double(Some("Wind"), 2, 2.0, None),
        ],
        1,
    );
    let j = run("spBv1.0/f/DDATA/n/d", &bytes, None);
    assert_eq!(
        j.items.len(),
        2,
        "one reading at the metric's time, one at the payload's"
    );
    let mut m = mapping();
    m.time = TimeFrom::Payload;
    let j = judge("spBv1.0/f/DDATA/n/d", &bytes, None, &rules(), &m, now());
    assert_eq!(j.items.len(), 1);
    assert_eq!(
        reading(&j.items[0]).recorded_at.timestamp_millis() as u64,
        T0
    );
    // No timestamp anywhere.
    let bytes = Payload {
        timestamp: None,
        metrics: vec![double(Some("Power"), 1, 1.0, None)],
        seq: Some(1),
        uuid: None,
    }
    .to_bytes();
    let r = rejection(&run("spBv1.0/f/DDATA/n/d", &bytes, None).items[0]).clone();
    assert!(r.detail.contains("timestamp"), "{}", r.detail);
    // Past the clock skew: quarantined as future, like JSON.
    let bytes = payload(vec![double(Some("Power"), 1, 1.0, Some(T0 + 3_600_000))], 1);
    assert!(matches!(
        run("spBv1.0/f/DDATA/n/d", &bytes, None).items[0],
        Decoded::Future(_)
    ));
    // Before 2000 and past 2^63 ms: invalid_value.
    for at in [0, u64::MAX] {
        let bytes = payload(vec![double(Some("Power"), 1, 1.0, Some(at))], 1);
        let j = run("spBv1.0/f/DDATA/n/d", &bytes, None);
        assert_eq!(
            rejection(&j.items[0]).reason,
            RejectReason::InvalidValue,
            "{at}"
        );
    }
}

#[test]
fn contradictions_and_excess_are_refused_by_name() {
    // One signal fed twice at one instant.
    let bytes = payload(
        vec![
            double(Some("Power"), 1, 1.0, Some(T0)),
            double(Some("Power"), 1, 2.0, Some(T0)),
        ],
        1,
    );
    let r = rejection(&run("spBv1.0/f/DDATA/n/d", &bytes, None).items[0]).clone();
    assert!(r.detail.contains("fed twice"), "{}", r.detail);
    // A birth giving one alias two names is refused whole and not stored.
    let bytes = payload(
        vec![
            double(Some("Power"), 1, 1.0, Some(T0)),
            double(Some("Wind"), 1, 2.0, Some(T0)),
        ],
        0,
    );
    let j = run("spBv1.0/f/DBIRTH/n/d", &bytes, None);
    assert!(j.birth.is_none());
    assert_eq!(rejection(&j.items[0]).reason, RejectReason::Malformed);
    // A name PostgreSQL could not store: refused, never a batch the database refuses.
    let bytes = payload(vec![double(Some("Po\0wer"), 1, 1.0, Some(T0))], 0);
    let j = run("spBv1.0/f/DBIRTH/n/d", &bytes, None);
    assert!(j.birth.is_none());
    assert!(rejection(&j.items[0]).detail.contains("NUL"));
    // More metrics than the limit: too_large before decoding.
    let many: Vec<Metric> = (0..101).map(|i| double(Some("x"), i, 1.0, None)).collect();
    let r = rejection(&run("spBv1.0/f/DDATA/n/d", &payload(many, 1), None).items[0]).clone();
    assert_eq!(r.reason, RejectReason::TooLarge);
    // More readings than the limit.
    let mut rules = rules();
    rules.max_readings_per_message = 3;
    let metrics: Vec<Metric> = (0..4)
        .map(|i| double(Some("Power"), 1, 1.0, Some(T0 + i)))
        .collect();
    let j = judge(
        "spBv1.0/f/DDATA/n/d",
        &payload(metrics, 1),
        None,
        &rules,
        &mapping(),
        now(),
    );
    assert_eq!(rejection(&j.items[0]).reason, RejectReason::TooLarge);
    // Not protobuf, a bad topic, a payload over the size limit.
    let j = run("spBv1.0/f/DDATA/n/d", b"{\"power_kw\": 1}", None);
    assert_eq!(rejection(&j.items[0]).reason, RejectReason::Malformed);
    let j = run("spBv1.0/f/DDATA/n", &payload(vec![], 1), None);
    assert_eq!(rejection(&j.items[0]).reason, RejectReason::Malformed);
    rules.max_message_bytes = 4;
    let j = judge(
        "spBv1.0/f/DDATA/n/d",
        &payload(vec![], 1),
        None,
        &rules,
        &mapping(),
        now(),
    );
    assert_eq!(rejection(&j.items[0]).reason, RejectReason::TooLarge);
    // Commands and states are not readings.
    assert!(run("spBv1.0/f/NCMD/n", &rebirth_request(T0), None)
        .items
        .is_empty());
    assert!(run("spBv1.0/STATE/h", b"{\"online\":true}", None)
        .items
        .is_empty());
}

#[test]
fn the_rebirth_request_and_state_are_what_the_specification_says() {
    let p = proto::decode(&rebirth_request(T0), 10).unwrap();
    assert_eq!(p.metrics.len(), 1);
    assert_eq!(p.metrics[0].name.as_deref(), Some(REBIRTH_METRIC));
    assert_eq!(p.metrics[0].value, Some(Value::Boolean(true)));
    assert_eq!(rebirth_topic("g", "n"), "spBv1.0/g/NCMD/n");
    let (topic, body) = state("scada", false, 5);
    assert_eq!(topic, "spBv1.0/STATE/scada");
    assert_eq!(body, br#"{"online":false,"timestamp":5}"#);
    assert_eq!(
        filters("+"),
        [
            "spBv1.0/+/NBIRTH/#",
            "spBv1.0/+/NDATA/#",
            "spBv1.0/+/NDEATH/#",
            "spBv1.0/+/DBIRTH/#",
            "spBv1.0/+/DDATA/#",
            "spBv1.0/+/DDEATH/#"
        ]
    );
}

fn any_value() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        any::<u32>().prop_map(|v| Some(Value::Int(v))),
        any::<u64>().prop_map(|v| Some(Value::Long(v))),
        any::<f32>().prop_map(|v| Some(Value::Float(v))),
        any::<f64>().prop_map(|v| Some(Value::Double(v))),
        any::<bool>().prop_map(|v| Some(Value::Boolean(v))),
        ".{0,8}".prop_map(|v| Some(Value::String(v))),
    ]
}

fn any_metric() -> impl Strategy<Value = Metric> {
    (
        prop::option::of(prop::sample::select(vec![
            "Power", "Wind", "Rotor", "Other",
        ])),
        prop::option::of(0u64..6),
        prop::option::of(prop_oneof![Just(T0), Just(T0 + 1), any::<u64>()]),
        prop::option::of(0u32..20),
        prop::option::of(any::<bool>()),
        any_value(),
    )
        .prop_map(
            |(name, alias, timestamp, datatype, is_null, value)| Metric {
                name: name.map(str::to_string),
                alias,
                timestamp,
                datatype,
                is_null,
                value,
                ..Metric::default()
            },
        )
}

proptest! {
    /// Any bytes: an answer, never a panic.
    #[test]
    fn any_bytes_are_judged(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let j = run("spBv1.0/f/DDATA/n/d", &bytes, None);
        prop_assert!(j.items.len() <= rules().max_readings_per_message);
    }

    /// Any well-framed payload: every reading is within the rules, every metric is a reading's
    /// part, ignored or the cause of a whole-message rejection, and judging is deterministic.
    #[test]
    fn any_payload_is_judged_within_the_rules(
        metrics in prop::collection::vec(any_metric(), 0..12),
        birth in any::<bool>(),
    ) {
        let topic = if birth { "spBv1.0/f/DBIRTH/n/d" } else { "spBv1.0/f/DDATA/n/d" };
        let bytes = payload(metrics.clone(), 1);
        let j = run(topic, &bytes, None);
        let again = run(topic, &bytes, None);
        prop_assert_eq!(&j.items, &again.items);
        prop_assert!(j.ignored <= metrics.len() as u64);
        for d in &j.items {
            match d {
                Decoded::Reading(r) | Decoded::Future(r) => {
                    prop_assert_eq!(&*r.turbine_id, "d");
                    prop_assert!(!r.values.0[0].is_null(), "power_kw is required");
                    for v in r.values.iter() {
                        if let Datum::Float(x) = v {
                            prop_assert!(x.is_finite());
                        }
                    }
                }
                Decoded::Rejected(r) => prop_assert!(!r.detail.is_empty()),
            }
        }
        if j.unknown_alias {
            prop_assert!(!birth);
            prop_assert_eq!(j.items.len(), 1);
        }
    }
}

#[test]
fn typed_signals_follow_the_json_rules() {
    // One signal of each type: power_kw (float, required), status_code (integer 0–9999), mode
    // (text, 16 bytes), curtailed (boolean), as JSON's nested test shape declares them.
    let sig = crate::core::signals::SignalSetting::new;
    let mut power = sig("power_kw", SignalKind::Float);
    power.required = true;
    (power.min, power.max) = (Some(-1000.0), Some(50_000.0));
    let mut code = sig("status_code", SignalKind::Integer);
    (code.min, code.max) = (Some(0.0), Some(9999.0));
    let mut mode = sig("mode", SignalKind::Text);
    mode.max_bytes = Some(16);
    let signals =
        Signals::new(&[power, code, mode, sig("curtailed", SignalKind::Boolean)]).unwrap();
    let rules = Limits::new(signals);
    let map = Mapping {
        signals: [("P", 0), ("Code", 1), ("Mode", 2), ("Curtailed", 3)]
            .into_iter()
            .map(|(n, i)| (n.to_string(), i))
            .collect(),
        ..mapping()
    };
    let judge_one = |code: Metric| {
        let metrics = vec![
            Metric::new(datatype::INT64, Value::Long(1500))
                .named("P")
                .at(T0),
            code.named("Code").at(T0),
        ];
        let mut j = judge(
            "spBv1.0/f/DDATA/n/d",
            &payload(metrics, 1),
            None,
            &rules,
            &map,
            now(),
        );
        j.items.remove(0)
    };
    // An integer power feeds a float signal; a double 12.0 is the integer 12 (as JSON's 12.0).
    let d = judge_one(Metric::new(datatype::DOUBLE, Value::Double(12.0)));
    assert_eq!(
        reading(&d).values.0[..2],
        [Datum::Float(1500.0), Datum::Int(12)]
    );
    let d = judge_one(Metric::new(datatype::UINT16, Value::Int(65_535)));
    assert_eq!(
        rejection(&d).reason,
        RejectReason::InvalidValue,
        "past 9999"
    );
    let d = judge_one(Metric::new(datatype::DOUBLE, Value::Double(12.5)));
    assert_eq!(
        rejection(&d).reason,
        RejectReason::Malformed,
        "not an integer"
    );
    let d = judge_one(Metric::new(datatype::UINT64, Value::Long(u64::MAX)));
    let r = rejection(&d);
    assert_eq!(r.reason, RejectReason::InvalidValue);
    assert!(
        r.detail.contains("out of range for a 64-bit integer"),
        "{}",
        r.detail
    );
    let d = judge_one(Metric::new(datatype::BOOLEAN, Value::Boolean(true)));
    assert_eq!(rejection(&d).reason, RejectReason::Malformed);
    // Text and boolean signals.
    let metrics = vec![
        Metric::new(datatype::FLOAT, Value::Float(0.1))
            .named("P")
            .at(T0),
        Metric::new(datatype::STRING, Value::String("run".into()))
            .named("Mode")
            .at(T0),
        Metric::new(datatype::BOOLEAN, Value::Boolean(false))
            .named("Curtailed")
            .at(T0),
    ];
    let j = judge(
        "spBv1.0/f/DDATA/n/d",
        &payload(metrics, 1),
        None,
        &rules,
        &map,
        now(),
    );
    assert_eq!(
        reading(&j.items[0]).values.0.as_ref(),
        [
            Datum::Float(0.1),
            Datum::Null,
            Datum::Text("run".into()),
            Datum::Bool(false)
        ]
    );
    let long = Metric::new(datatype::STRING, Value::String("x".repeat(17)))
        .named("Mode")
        .at(T0);
    let p = Metric::new(datatype::DOUBLE, Value::Double(1.0))
        .named("P")
        .at(T0);
    let j = judge(
        "spBv1.0/f/DDATA/n/d",
        &payload(vec![p, long], 1),
        None,
        &rules,
        &map,
        now(),
    );
    let r = rejection(&j.items[0]);
    assert_eq!(r.reason, RejectReason::InvalidValue);
    assert!(r.detail.contains("mode (metric \"Mode\")"), "{}", r.detail);
}

#[test]
fn a_birth_giving_one_name_two_aliases_is_refused() {
    let bytes = payload(
        vec![
            double(Some("Power"), 1, 1.0, Some(T0)),
            double(Some("Power"), 2, 2.0, Some(T0)),
        ],
        1,
    );
    let j = run("spBv1.0/farm/DBIRTH/gw1/WTG-01", &bytes, None);
    assert!(j.birth.is_none());
    let r = rejection(&j.items[0]);
    assert_eq!(r.reason, RejectReason::Malformed);
    assert!(r.detail.contains("two aliases"), "{}", r.detail);
}

#[test]
fn what_a_named_metric_feeds_follows_the_mapping_and_the_level() {
    let mut map = mapping();
    let power = map.signals["Power"];
    assert_eq!(map.feeds(true, "Power"), Feed::Signal(power));
    assert_eq!(map.feeds(true, "Power/Reactive"), Feed::NotMapped);
    assert_eq!(map.feeds(true, "power"), Feed::NotMapped, "names are exact");
    assert_eq!(
        map.feeds(false, "Power"),
        Feed::LevelNamesNoTurbine(power),
        "a node's own metrics feed nothing when turbines are devices"
    );
    map.turbine = TurbineFrom::GroupEdgeNode;
    assert_eq!(map.feeds(false, "Power"), Feed::Signal(power));
    assert_eq!(map.feeds(true, "Power"), Feed::LevelNamesNoTurbine(power));
}
