//! La Haute Borne, replayed through the daemon: two years of four Senvion MM82 turbines'
//! 10-minute SCADA (the open data OpenOA ships; `bench/lhb/fetch` brings it, `.ci/run` runs
//! it), with the quality rules of `config/examples/la-haute-borne.toml`. Every reading is
//! accounted for (the 48 repeated across a daylight-saving change quarantined as collisions),
//! and every turbine-hour's counts, means, extremes, vector-mean directions and flags equal an
//! independent computation from the file; the clean hours are counted and the regular export
//! holds every hour of the two years.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

const SETTINGS: &str = include_str!("../config/examples/la-haute-borne.toml");

/// Galewatch's names for the file's columns after the id and the time, in its order
/// (`Ba_avg,P_avg,Ws_avg,Va_avg,Ot_avg,Ya_avg,Wa_avg`).
const NAMES: [&str; 7] = [
    "pitch_deg",
    "power_kw",
    "wind_speed_ms",
    "vane_deg",
    "outdoor_temp_c",
    "nacelle_deg",
    "wind_dir_deg",
];

/// A column's rules as the example declares them: an angle; the equal values in a row that are
/// a frozen sensor, where it is judged stuck; the plausible bounds.
type Rules = (bool, Option<usize>, Option<(f64, f64)>);

const RULES: [Rules; 7] = [
    (false, None, Some((-10.0, 95.0))),
    (false, Some(3), Some((-100.0, 2100.0))),
    (false, Some(3), Some((0.0, 40.0))),
    (true, Some(3), None),
    (false, Some(6), Some((-40.0, 50.0))),
    (true, None, None),
    (true, Some(3), None),
];

/// The data: `LHB_CSV`, else where `bench/lhb/fetch` keeps it.
fn csv_path() -> PathBuf {
    let p = match std::env::var("LHB_CSV") {
        Ok(p) => PathBuf::from(p),
        Err(_) => PathBuf::from(std::env::var("HOME").expect("HOME"))
            .join(".cache/galewatch/la-haute-borne/la-haute-borne-data-2014-2015.csv"),
    };
    assert!(
        p.exists(),
        "La Haute Borne's data is not at {}: run bench/lhb/fetch (.ci/run does), or set LHB_CSV",
        p.display()
    );
    p
}

/// One row of the file: the turbine, the instant, and each column's text (None: empty).
struct Row {
    turbine: String,
    at: DateTime<Utc>,
    time: String,
    text: [Option<String>; 7],
}

impl Row {
    fn value(&self, k: usize) -> Option<f64> {
        self.text[k].as_deref().map(|t| t.parse().unwrap())
    }

    fn json(&self) -> String {
        let mut fields = vec![format!(r#""recorded_at":"{}""#, self.time)];
        for (k, t) in self.text.iter().enumerate() {
            if let Some(t) = t {
                fields.push(format!(r#""{}":{t}"#, NAMES[k]));
            }
        }
        format!("{{{}}}", fields.join(","))
    }
}

fn read() -> Vec<Row> {
    let text = std::fs::read_to_string(csv_path()).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("Wind_turbine_name,Date_time,Ba_avg,P_avg,Ws_avg,Va_avg,Ot_avg,Ya_avg,Wa_avg")
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 9, "{l}");
            Row {
                turbine: f[0].to_string(),
                at: DateTime::parse_from_rfc3339(f[1]).unwrap().to_utc(),
                time: f[1].to_string(),
                text: std::array::from_fn(|k| {
                    Some(f[2 + k]).filter(|t| !t.is_empty()).map(String::from)
                }),
            }
        })
        .collect()
}

/// One turbine-hour as the file gives it: readings, and per column its values.
#[derive(Default)]
struct Hour {
    readings: i64,
    values: [Vec<f64>; 7],
}

/// What the file says the daemon must do: the rows stored (the first of each turbine and
/// instant), the exact resends and the collisions (same key, other values).
fn judged(rows: &[Row]) -> (Vec<&Row>, i64, i64) {
    let mut first: HashMap<(&str, DateTime<Utc>), &Row> = HashMap::new();
    let (mut stored, mut duplicates, mut collisions) = (Vec::new(), 0, 0);
    for r in rows {
        match first.get(&(r.turbine.as_str(), r.at)) {
            None => {
                first.insert((&r.turbine, r.at), r);
                stored.push(r);
            }
            Some(f) if (0..7).all(|k| f.value(k) == r.value(k)) => duplicates += 1,
            Some(_) => collisions += 1,
        }
    }
    (stored, duplicates, collisions)
}

/// The vector mean of directions, degrees in [0, 360).
fn vector_mean(xs: &[f64]) -> f64 {
    let (s, c) = xs.iter().fold((0.0, 0.0), |(s, c), x| {
        (s + x.to_radians().sin(), c + x.to_radians().cos())
    });
    (s / xs.len() as f64)
        .atan2(c / xs.len() as f64)
        .to_degrees()
        .rem_euclid(360.0)
}

/// The flags the example's rules raise on column `k` of `h`; `frozen`: whether a value of it
/// lies in a frozen run ([`frozen_hours`]).
fn flags(k: usize, h: &Hour, frozen: bool) -> String {
    let bounds = RULES[k].2;
    let v = &h.values[k];
    let mut f = Vec::new();
    if frozen {
        f.push("stuck");
    }
    if bounds.is_some_and(|(a, b)| v.iter().any(|x| *x < a || *x > b)) {
        f.push("implausible");
    }
    if (v.len() as i64) < h.readings {
        f.push("absent");
    }
    f.join(",")
}

type Hours = BTreeMap<(String, DateTime<Utc>), Hour>;

/// An hour of a turbine and its values of one column.
type Piece<'a> = (&'a (String, DateTime<Utc>), &'a [f64]);

/// The (turbine, hour, column) holding a value of a frozen run: enough equal values in a row
/// (`RULES`) of a column judged stuck, the run followed through the next hour of the same turbine
/// while it holds values of the column (an hour without any breaks it).
fn frozen_hours(hours: &Hours) -> HashSet<(String, DateTime<Utc>, usize)> {
    let mut out = HashSet::new();
    for (k, min) in (0..7).filter_map(|k| Some((k, RULES[k].1?))) {
        let mut stretch: Vec<Piece> = Vec::new();
        let mut flush = |stretch: &mut Vec<Piece>| {
            let all: Vec<f64> = stretch
                .iter()
                .flat_map(|(_, v)| v.iter().copied())
                .collect();
            let mut frozen = vec![false; all.len()];
            let mut start = 0;
            for i in 1..=all.len() {
                if i == all.len() || all[i] != all[i - 1] {
                    let is = i - start >= min;
                    frozen[start..i].iter_mut().for_each(|f| *f = is);
                    start = i;
                }
            }
            let mut at = 0;
            for (key, v) in stretch.drain(..) {
                if frozen[at..at + v.len()].iter().any(|f| *f) {
                    out.insert((key.0.clone(), key.1, k));
                }
                at += v.len();
            }
        };
        for (key, h) in hours {
            let v = h.values[k].as_slice();
            let follows = stretch
                .last()
                .is_some_and(|(p, _)| p.0 == key.0 && p.1 + chrono::Duration::hours(1) == key.1);
            if !follows || v.is_empty() {
                flush(&mut stretch);
            }
            if !v.is_empty() {
                stretch.push((key, v));
            }
        }
        flush(&mut stretch);
    }
    out
}

/// Whether `got` (an exported figure) is `want` to 1e-12 of its size.
fn close(got: &serde_json::Value, want: f64) -> bool {
    got.as_f64()
        .is_some_and(|g| (g - want).abs() <= 1e-12 * want.abs().max(1.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn la_haute_borne_is_told_exactly_hour_by_hour() {
    let rows = read();
    assert_eq!(rows.len(), 420_480);
    let (stored, duplicates, collisions) = judged(&rows);
    assert_eq!(collisions, 48, "the repeated hour of each spring change");

    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, _file) = Daemon::ready_with(&broker, &db, "gw-lhb", SETTINGS);
    // Each turbine's rows in the file's order, 500 a message.
    let mut by_turbine: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for r in &rows {
        by_turbine.entry(&r.turbine).or_default().push(r.json());
    }
    let messages: Vec<(String, Vec<u8>)> = by_turbine
        .iter()
        .flat_map(|(t, readings)| {
            readings.chunks(500).map(move |c| {
                json(
                    &format!("turbines/{t}/readings"),
                    &format!("[{}]", c.join(",")),
                )
            })
        })
        .collect();
    publish(&broker, messages).await;
    let want = stored.len() as i64;
    eventually(Duration::from_secs(600), "every reading landed", || async {
        db.rows().await == want && db.count("SELECT count(*) FROM quarantine").await == collisions
    })
    .await;
    // The account, in the metrics: every reading received is one of the four outcomes.
    let n = rows.len() as f64;
    scrape_with(
        &d,
        Duration::from_secs(30),
        &[
            ("galewatch_readings_received_total", n),
            ("galewatch_readings_inserted_total", want as f64),
            ("galewatch_readings_duplicate_total", duplicates as f64),
            ("galewatch_readings_quarantined_total", collisions as f64),
        ],
    )
    .await;

    // The file's hours, from the rows stored, in time order.
    let mut hours: Hours = BTreeMap::new();
    let mut in_order = stored.clone();
    in_order.sort_by_key(|r| (r.turbine.as_str(), r.at));
    for r in &in_order {
        let ts = r.at.timestamp();
        let hour = DateTime::<Utc>::from_timestamp(ts - ts.rem_euclid(3600), 0).unwrap();
        let h = hours.entry((r.turbine.clone(), hour)).or_default();
        h.readings += 1;
        for k in 0..7 {
            if let Some(x) = r.value(k) {
                h.values[k].push(x);
            }
        }
    }

    let export = |extra: &[&str]| {
        let mut args = vec![
            "export",
            "--from",
            "2014-01-01",
            "--to",
            "2016-01-01",
            "--format",
            "jsonl",
        ];
        args.extend(extra);
        stdout_jsonl(&d.command(&args))
    };
    let frozen = frozen_hours(&hours);
    let exported = export(&["--only-stored"]);
    assert_eq!(exported.len(), hours.len());
    for (row, ((turbine, hour), h)) in exported.iter().zip(&hours) {
        let at = format!("{turbine} {hour}");
        assert_eq!(row["turbine_id"].as_str(), Some(turbine.as_str()), "{at}");
        assert_eq!(row["readings"].as_i64(), Some(h.readings), "{at}");
        for (k, name) in NAMES.iter().enumerate() {
            let v = &h.values[k];
            let col = |s: &str| &row[format!("{name}_{s}")];
            assert_eq!(col("n").as_i64(), Some(v.len() as i64), "{at} {name}");
            assert_eq!(
                col("flags").as_str(),
                Some(flags(k, h, frozen.contains(&(turbine.clone(), *hour, k))).as_str()),
                "{at} {name}"
            );
            if v.is_empty() {
                continue;
            }
            if RULES[k].0 {
                let m = vector_mean(v);
                let g = col("mean").as_f64().unwrap_or(f64::NAN);
                let apart = (g - m).rem_euclid(360.0).min((m - g).rem_euclid(360.0));
                assert!(apart < 1e-9, "{at} {name}: {g} against {m}");
            } else {
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                assert!(
                    close(col("mean"), mean),
                    "{at} {name}: {} against {mean}",
                    col("mean")
                );
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                assert_eq!(
                    (col("min").as_f64(), col("max").as_f64()),
                    (Some(lo), Some(hi))
                );
            }
        }
    }

    // The hours an engineer keeps: flagged on no signal. And every hour of the two years, in
    // the regular series.
    let clean = hours
        .iter()
        .filter(|((t, at), h)| {
            (0..7).all(|k| flags(k, h, frozen.contains(&(t.clone(), *at, k))).is_empty())
        })
        .count();
    assert_eq!(export(&["--quality", "clean"]).len(), clean);
    eprintln!(
        "La Haute Borne: {clean} clean turbine-hours of {} stored, {} in two years ({:.2} %)",
        hours.len(),
        4 * 17_520,
        100.0 * clean as f64 / (4.0 * 17_520.0)
    );
    assert_eq!(export(&[]).len(), 4 * 17_520);
    let turbulence = exported.iter().zip(&hours).all(|(row, (_, h))| {
        let w = &h.values[2];
        let n = w.len() as f64;
        let mean = w.iter().sum::<f64>() / n;
        let sd = (w.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt();
        w.is_empty() || mean < 1e-100 || close(&row["wind_speed_ms_ti"], sd / mean)
    });
    assert!(
        turbulence,
        "every hour's σ/V as pandas' std(ddof=0) / mean() gives it"
    );
    iec_on_r80711(&db, &hours, &frozen).await;
    // For bench/lhb/compare.py: the hourly CSV, where LHB_EXPORT says.
    if let Ok(path) = std::env::var("LHB_EXPORT") {
        let out = d.command(&[
            "export",
            "--from",
            "2014-01-01",
            "--to",
            "2016-01-01",
            "--output",
            &path,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    d.terminate();
}

/// A reference of the MM82's shape (2,050 kW; approximate, not the maker's warranted curve): what
/// R80711 is held against in IEC 61400-12-1's figures below.
const REFERENCE: &str = "[[3.0, 0.0], [4.0, 60.0], [5.0, 170.0], [6.0, 350.0], [7.0, 590.0], [8.0, 900.0], [9.0, 1260.0], [10.0, 1620.0], [11.0, 1900.0], [12.0, 2030.0], [13.0, 2050.0], [25.0, 2050.0]]";

fn reference_at(w: f64) -> Option<f64> {
    let p: Vec<(f64, f64)> = serde_json::from_str::<Vec<[f64; 2]>>(REFERENCE)
        .unwrap()
        .iter()
        .map(|x| (x[0], x[1]))
        .collect();
    let i = p.iter().position(|x| x.0 >= w)?;
    if w < p[0].0 {
        return None;
    }
    if i == 0 || p[i].0 == w {
        return Some(p[i].1);
    }
    let ((x0, y0), (x1, y1)) = (p[i - 1], p[i]);
    Some(y0 + (y1 - y0) * (w - x0) / (x1 - x0))
}

/// R80711 in 2015 as IEC 61400-12-1 takes it, against the hours by hand: the clean hours (six
/// readings, wind and power unflagged) with a density (their mean temperature, the standard
/// atmosphere at 411 m), binned on winds normalised to `rho0`; the deviation from [`REFERENCE`],
/// each bin's turbulence, the AEP table and the wind rose; with `rho0` the site's mean density
/// (OpenOA's normalisation: bench/lhb/iec.py) and raw, printed.
async fn iec_on_r80711(
    db: &TestDb,
    hours: &Hours,
    frozen: &HashSet<(String, DateTime<Utc>, usize)>,
) {
    let year = |y: i32| {
        chrono::NaiveDate::from_ymd_opt(y, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc()
    };
    let (from, to) = (year(2015), year(2016));
    let pressure = 101_325.0 * (1.0 - 2.25577e-5 * 411.0f64).powf(5.25588);
    let mine: Vec<(&DateTime<Utc>, &Hour)> = hours
        .iter()
        .filter(|((t, at), _)| t == "R80711" && *at >= from && *at < to)
        .map(|((_, at), h)| (at, h))
        .collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    // (normalised-to-1 wind factor's input ρ, raw wind, power, σ/V) of each clean hour with a density.
    let clean: Vec<(f64, f64, f64, f64)> = mine
        .iter()
        .filter(|(at, h)| {
            h.readings == 6
                && [1, 2].iter().all(|&k| {
                    flags(k, h, frozen.contains(&("R80711".to_string(), **at, k))).is_empty()
                })
                && mean(&h.values[2]) >= 0.0
        })
        .filter_map(|(_, h)| {
            let t = h.values[4].as_slice();
            let t = (!t.is_empty())
                .then(|| mean(t))
                .filter(|t| (-80.0..=70.0).contains(t))?;
            let rho = pressure / 287.05 / (t + 273.15);
            let w = mean(&h.values[2]);
            let sd = (h.values[2].iter().map(|x| (x - w) * (x - w)).sum::<f64>() / 6.0).sqrt();
            Some((rho, w, mean(&h.values[1]), sd / w))
        })
        .collect();
    let site = clean.iter().map(|c| c.0).sum::<f64>() / clean.len() as f64;
    let (lo, hi) = clean
        .iter()
        .fold((f64::MAX, f64::MIN), |a, c| (a.0.min(c.0), a.1.max(c.0)));
    // Bins by hand of the winds normalised to rho0 (None: raw).
    let bins = |rho0: Option<f64>| {
        let mut by: BTreeMap<i64, Vec<(f64, f64, f64)>> = BTreeMap::new();
        for &(rho, w, p, ti) in &clean {
            let v = rho0.map_or(w, |r0| w * (rho / r0).powf(1.0 / 3.0));
            by.entry((v / 0.5).floor() as i64)
                .or_default()
                .push((v, p, ti));
        }
        by
    };
    let deviation = |by: &BTreeMap<i64, Vec<(f64, f64, f64)>>| {
        let (mut produced, mut expected) = (0.0, 0.0);
        for xs in by.values() {
            let n = xs.len() as f64;
            let v = xs.iter().map(|x| x.0).sum::<f64>() / n;
            if let Some(e) = reference_at(v) {
                produced += xs.iter().map(|x| x.1).sum::<f64>();
                expected += e * n;
            }
        }
        produced / expected - 1.0
    };
    let extra = |more: &str| {
        let text = SETTINGS.replacen(
            "power_curve_wind_signal",
            &format!("power_curve_reference = {REFERENCE}\n{more}\npower_curve_wind_signal"),
            1,
        );
        SettingsFile::new(&text)
    };
    let range = format!("from={}&to={}", from.timestamp(), to.timestamp());
    let mut figures = Vec::new();
    for (more, rho0) in [
        (String::new(), Some(1.225)),
        (
            format!("power_curve_reference_density = {site:?}"),
            Some(site),
        ),
        ("power_curve_normalise = false".to_string(), None),
    ] {
        let file = extra(&more);
        let panel = Panel::serve(db, &file.path).await;
        let (status, api) = panel
            .get(&format!("/api/turbines/R80711/power-curve?{range}"))
            .await;
        assert_eq!(status, 200, "{api}");
        let api: serde_json::Value = serde_json::from_str(&api).unwrap();
        let by = bins(rho0);
        assert_eq!(
            api["intervals"].as_u64(),
            Some(clean.len() as u64),
            "{more}"
        );
        let got = api["deviation"]["ratio"].as_f64().unwrap();
        let want = deviation(&by);
        assert!(
            (got - want).abs() < 1e-9,
            "{more}: deviation {got} against {want} by hand"
        );
        figures.push(got);
        if rho0 != Some(1.225) {
            continue;
        }
        // Each bin's turbulence, and the AEP over the bins of three hours or more.
        let mut curve = Vec::new();
        for (b, xs) in api["bins"].as_array().unwrap().iter().zip(by.values()) {
            let n = xs.len() as f64;
            let ti = xs.iter().map(|x| x.2).sum::<f64>() / n;
            assert!(close(&b["mean_ti"], ti), "{b} against {ti}");
            if xs.len() >= 3 {
                curve.push((
                    b["mean_wind"].as_f64().unwrap(),
                    b["mean_power"].as_f64().unwrap(),
                ));
            }
        }
        for row in api["iec"]["aep"].as_array().unwrap() {
            let mean = row["mean_wind"].as_f64().unwrap();
            let f = |v: f64| {
                if v <= 0.0 {
                    0.0
                } else {
                    1.0 - (-std::f64::consts::PI / 4.0 * (v / mean).powi(2)).exp()
                }
            };
            let (mut v0, mut p0, mut sum) = (curve[0].0 - 0.5, 0.0, 0.0);
            for &(v, p) in &curve {
                sum += (f(v) - f(v0)) * (p0 + p) / 2.0;
                (v0, p0) = (v, p);
            }
            assert!(
                close(&row["measured"], 8760.0 * sum),
                "{row} against {}",
                8760.0 * sum
            );
        }
        // The wind rose: every hour with a direction and a plausible wind, by hand.
        let mut rose = vec![[0i64; 5]; 12];
        for (_, h) in &mine {
            let (d, w) = (&h.values[6], &h.values[2]);
            if d.is_empty() || w.is_empty() || w.iter().any(|x| !(0.0..=40.0).contains(x)) {
                continue;
            }
            let sector = ((vector_mean(d) + 15.0).rem_euclid(360.0) / 30.0).floor() as usize % 12;
            let class = [4.0, 8.0, 12.0, 16.0]
                .iter()
                .take_while(|&&x| mean(w) >= x)
                .count();
            rose[sector][class] += 1;
        }
        let (_, got) = panel
            .get(&format!("/api/turbines/R80711/wind-rose?{range}"))
            .await;
        let got: serde_json::Value = serde_json::from_str(&got).unwrap();
        let got: Vec<[i64; 5]> = (got["sectors"].as_array().unwrap().iter())
            .map(|s| serde_json::from_value(s["counts"].clone()).unwrap())
            .collect();
        assert_eq!(got, rose, "the wind rose of R80711 in 2015");
        eprintln!("La Haute Borne R80711 2015: wind rose (12 sectors × 5 classes) {rose:?}");
    }
    eprintln!(
        "La Haute Borne R80711 2015, {} clean hours with a density ({lo:.4}–{hi:.4} kg/m³, mean {site:?}): \
         deviation from the MM82-shaped reference {:+.6} % normalised to 1.225, {:+.6} % to the site's mean (OpenOA's), {:+.6} % raw",
        clean.len(),
        100.0 * figures[0],
        100.0 * figures[1],
        100.0 * figures[2]
    );
}
