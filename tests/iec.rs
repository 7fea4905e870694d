//! The power curve as IEC 61400-12-1 signs it, end to end against a real broker and database,
//! each figure against an independent computation from the readings sent: a site at 3,000 m
//! without a pressure signal (the standard atmosphere, declared), the curve on winds normalised
//! to 1.225 kg/m³, a measurement sector across north, a bin of one interval, each bin's
//! turbulence, Cp and category A uncertainty, the database's completeness, the AEP table on
//! Rayleigh winds and the site's Weibull, the wind rose; the API, the page and both exports.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

const SETTINGS: &str = r#"
sample_period = "20s"
power_curve_reference = [[3.0, 0.0], [12.0, 3000.0], [25.0, 3000.0]]
power_curve_temperature_signal = "temp_c"
power_curve_elevation = 3000
power_curve_direction_signal = "wind_dir"
power_curve_sectors = { "T-" = [[340, 20]] }
power_curve_rotor_diameter = 82
power_curve_weibull = [7.5, 2.1]
[[signals]]
name = "power_kw"
[[signals]]
name = "wind_speed_ms"
[[signals]]
name = "temp_c"
min = -273
max = 1000
[[signals]]
name = "wind_dir"
angle = true
"#;

fn warranted(w: f64) -> f64 {
    (w.clamp(3.0, 12.0) - 3.0) / 9.0 * 3000.0
}

/// One interval as sent: its start, mean-wind level, temperature and direction.
#[derive(Clone, Copy)]
struct Sent {
    start: DateTime<Utc>,
    wind: f64,
    temp: f64,
    dir: f64,
}

/// Its 30 readings (one every 20 s): wind varying by 0.05 (no frozen sensor), direction by ±1°,
/// power 0.9 × the warranted curve at the reading's wind.
fn readings(s: &Sent) -> Vec<(f64, f64, f64, f64)> {
    (0..30)
        .map(|k| {
            let w = s.wind + (k % 3) as f64 * 0.05;
            let d = (s.dir + (k % 3) as f64 - 1.0).rem_euclid(360.0);
            (w, 0.9 * warranted(w), s.temp + (k % 2) as f64 * 0.1, d)
        })
        .collect()
}

/// The site's intervals: three at each of four wind levels inside the sector (340°–20°, across
/// north), three at 8 m/s outside it, one lone interval at 11.6 m/s (its power varies: not frozen).
fn intervals(start: DateTime<Utc>) -> Vec<Sent> {
    let mut out = Vec::new();
    let mut at = |wind: f64, temp: f64, dir: f64| {
        let start = start + chrono::Duration::minutes(10 * out.len() as i64);
        out.push(Sent {
            start,
            wind,
            temp,
            dir,
        });
    };
    for (i, level) in [5.0, 7.0, 9.0, 11.0].into_iter().enumerate() {
        for (j, dir) in [350.0, 5.0, 15.0].into_iter().enumerate() {
            at(level, -12.0 + 3.0 * i as f64 + j as f64, dir);
        }
    }
    for dir in [180.0, 200.0, 90.0] {
        at(8.0, 0.0, dir);
    }
    at(11.6, -5.0, 0.5);
    out
}

/// The standard atmosphere's pressure at 3,000 m, Pa, as IEC takes it.
fn pressure() -> f64 {
    101_325.0 * (1.0 - 2.25577e-5 * 3000.0f64).powf(5.25588)
}

/// One interval by hand: mean wind, mean power, mean temperature, vector-mean direction, σ/V.
struct Means {
    wind: f64,
    power: f64,
    temp: f64,
    dir: f64,
    ti: f64,
}

fn means(rs: &[(f64, f64, f64, f64)]) -> Means {
    let n = rs.len() as f64;
    let mean = |f: fn(&(f64, f64, f64, f64)) -> f64| rs.iter().map(f).sum::<f64>() / n;
    let wind = mean(|r| r.0);
    let var = rs.iter().map(|r| (r.0 - wind) * (r.0 - wind)).sum::<f64>() / n;
    let (s, c) = (
        mean(|r| r.3.to_radians().sin()),
        mean(|r| r.3.to_radians().cos()),
    );
    Means {
        wind,
        power: mean(|r| r.1),
        temp: mean(|r| r.2),
        dir: s.atan2(c).to_degrees().rem_euclid(360.0),
        ti: var.sqrt() / wind,
    }
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-9 * b.abs().max(1.0),
        "{what}: {a} against {b} by hand"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_curve_normalised_sectored_and_its_aep_equal_a_computation_by_hand() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, settings) = Daemon::ready_with(&broker, &db, "gw-iec", SETTINGS);
    let start = Utc::now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
        - chrono::Duration::days(2);
    let sent = intervals(start);
    let mut msgs = Vec::new();
    for s in &sent {
        let lines: Vec<String> = readings(s)
            .iter()
            .enumerate()
            .map(|(k, (w, p, t, dir))| {
                let at = s.start + chrono::Duration::seconds(20 * k as i64);
                format!(
                    r#"{{"recorded_at":"{}","power_kw":{p},"wind_speed_ms":{w},"temp_c":{t},"wind_dir":{dir}}}"#,
                    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )
            })
            .collect();
        msgs.push(json(
            "turbines/T-1/readings",
            &format!("[{}]", lines.join(",")),
        ));
    }
    // A turbine whose thermometer reads 500 °C: no density, so no interval in its curve.
    let hot: Vec<String> = (0..30)
        .map(|k| {
            let at = start + chrono::Duration::seconds(20 * k);
            let w = 7.0 + (k % 3) as f64 * 0.05;
            format!(
                r#"{{"recorded_at":"{}","power_kw":{},"wind_speed_ms":{w},"temp_c":500,"wind_dir":0}}"#,
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                warranted(w)
            )
        })
        .collect();
    msgs.push(json(
        "turbines/T-2/readings",
        &format!("[{}]", hot.join(",")),
    ));
    // Values no curve holds (the signals declare no bounds): a power of 1.7e308 (T-3), winds of
    // 1e300 m/s (T-4). Their intervals are no curve's, and break no other turbine's.
    for (id, wind, power) in [("T-3", 7.0, 1.7976931348623157e308), ("T-4", 1e300, 1000.0)] {
        let wild: Vec<String> = (0..30)
            .map(|k| {
                let at = start + chrono::Duration::seconds(20 * k);
                let f = 1.0 - (k % 3) as f64 * 1e-3;
                format!(
                    r#"{{"recorded_at":"{}","power_kw":{:e},"wind_speed_ms":{:e},"temp_c":0,"wind_dir":0}}"#,
                    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    power * f,
                    wind * f
                )
            })
            .collect();
        msgs.push(json(
            &format!("turbines/{id}/readings"),
            &format!("[{}]", wild.join(",")),
        ));
    }
    publish(&broker, msgs).await;
    let total = 30 * (sent.len() + 3);
    eventually(Duration::from_secs(60), "every reading stored", || async {
        db.rows().await == total as i64
    })
    .await;
    d.terminate();

    // By hand: each interval's density (ISA pressure at 3,000 m, dry air), normalised wind, and
    // whether its mean direction lies in 340°–20°.
    let rho0 = 1.225;
    let by_hand: Vec<(Means, f64, bool)> = sent
        .iter()
        .map(|s| {
            let m = means(&readings(s));
            let rho = pressure() / 287.05 / (m.temp + 273.15);
            let vn = m.wind * (rho / rho0).powf(1.0 / 3.0);
            let inside = m.dir >= 340.0 || m.dir <= 20.0;
            (m, vn, inside)
        })
        .collect();
    let counted: Vec<&(Means, f64, bool)> = by_hand.iter().filter(|x| x.2).collect();
    assert_eq!(counted.len(), 13);
    // The bins of the normalised winds.
    let mut bins: std::collections::BTreeMap<i64, Vec<&(Means, f64, bool)>> = Default::default();
    for x in &counted {
        bins.entry((x.1 / 0.5).floor() as i64).or_default().push(x);
    }

    let panel = Panel::serve(&db, &settings.path).await;
    let range = format!(
        "from={}&to={}",
        start.timestamp(),
        (start + chrono::Duration::hours(4)).timestamp()
    );
    let (status, api) = panel
        .get(&format!("/api/turbines/T-1/power-curve?{range}"))
        .await;
    assert_eq!(status, 200, "{api}");
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["intervals"], 13, "the sector leaves out three: {api}");
    let iec = &api["iec"];
    assert_eq!(iec["normalised"], true, "{iec}");
    assert_eq!(iec["basis"], "wind normalised to 1.225 kg/m³", "{iec}");
    assert!(
        iec["density_from"]
            .as_str()
            .unwrap()
            .contains("standard atmosphere"),
        "{iec}"
    );
    assert_eq!(iec["sectors"], serde_json::json!([[340.0, 20.0]]), "{iec}");
    let got = api["bins"].as_array().unwrap();
    assert_eq!(got.len(), bins.len(), "{api}");
    let area = std::f64::consts::PI * 82.0 * 82.0 / 4.0;
    let mut curve = Vec::new();
    for (b, (k, xs)) in got.iter().zip(&bins) {
        let n = xs.len() as f64;
        assert_eq!(b["wind_from"].as_f64(), Some(*k as f64 * 0.5), "{b}");
        assert_eq!(b["n"].as_i64(), Some(xs.len() as i64), "{b}");
        let wind = xs.iter().map(|x| x.1).sum::<f64>() / n;
        let power = xs.iter().map(|x| x.0.power).sum::<f64>() / n;
        let ti = xs.iter().map(|x| x.0.ti).sum::<f64>() / n;
        close(b["mean_wind"].as_f64().unwrap(), wind, "normalised wind");
        close(b["mean_power"].as_f64().unwrap(), power, "power");
        close(b["mean_ti"].as_f64().unwrap(), ti, "turbulence intensity");
        let cp = power * 1000.0 / (0.5 * rho0 * area * wind.powi(3));
        close(b["cp"].as_f64().unwrap(), cp, "Cp");
        if xs.len() >= 2 {
            let var = xs.iter().map(|x| (x.0.power - power).powi(2)).sum::<f64>() / (n - 1.0);
            close(b["u_a"].as_f64().unwrap(), (var / n).sqrt(), "u_A");
        } else {
            assert!(b["u_a"].is_null(), "a bin of one interval: {b}");
        }
        if xs.len() >= 3 {
            curve.push((wind, power));
        }
    }
    assert!(
        got.iter().any(|b| b["n"] == 1),
        "the lone 11.6 m/s interval: {api}"
    );

    // Completeness: 0.5 m/s bins from 2 m/s (cut-in 3 less 1) to 1.5 × 10.65 m/s (85 % of
    // 3,000 kW on the warranted curve), each needing 30 minutes.
    let c = &iec["completeness"];
    assert_eq!(c["complete"], false, "{c}");
    close(
        c["wind_to"].as_f64().unwrap(),
        1.5 * (3.0 + 9.0 * 0.85),
        "the range's end",
    );
    close(c["hours"].as_f64().unwrap(), 13.0 / 6.0, "hours");
    let short = (4..32)
        .filter(|k| bins.get(k).is_none_or(|xs| xs.len() < 3))
        .count();
    assert_eq!(c["bins_short"].as_array().unwrap().len(), short, "{c}");

    // AEP by the standard's sum over the bins of at least three intervals.
    let aep = |cdf: &dyn Fn(f64) -> f64, pts: &[(f64, f64)]| {
        let (mut v0, mut p0, mut sum) = (pts[0].0 - 0.5, 0.0, 0.0);
        for &(v, p) in pts {
            sum += (cdf(v) - cdf(v0)) * (p0 + p) / 2.0;
            (v0, p0) = (v, p);
        }
        (8760.0 * sum, 8760.0 * (sum + (cdf(25.0) - cdf(v0)) * p0))
    };
    // The reference at the bins' centres from 3.25 to 24.75 m/s, and its last point.
    let mut reference: Vec<(f64, f64)> = (6..50)
        .map(|k| (k as f64 * 0.5 + 0.25, warranted(k as f64 * 0.5 + 0.25)))
        .collect();
    reference.push((25.0, 3000.0));
    let rows = iec["aep"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        9,
        "Rayleigh 4 to 11 m/s and the site's Weibull: {iec}"
    );
    for row in rows {
        let cdf: Box<dyn Fn(f64) -> f64> = match row["distribution"].as_str() {
            Some("rayleigh") => {
                let mean = row["mean_wind"].as_f64().unwrap();
                Box::new(move |v: f64| {
                    if v <= 0.0 {
                        0.0
                    } else {
                        1.0 - (-std::f64::consts::PI / 4.0 * (v / mean).powi(2)).exp()
                    }
                })
            }
            _ => Box::new(|v: f64| {
                if v <= 0.0 {
                    0.0
                } else {
                    1.0 - (-(v / 7.5).powf(2.1)).exp()
                }
            }),
        };
        let (measured, extrapolated) = aep(&*cdf, &curve);
        close(row["measured"].as_f64().unwrap(), measured, "AEP-measured");
        close(
            row["extrapolated"].as_f64().unwrap(),
            extrapolated,
            "AEP-extrapolated",
        );
        let (_, r) = aep(&*cdf, &reference);
        close(row["reference"].as_f64().unwrap(), r, "the reference's AEP");
        close(
            row["ratio"].as_f64().unwrap(),
            extrapolated / r,
            "the ratio",
        );
    }

    // The turbulence range asked for: only the intervals with σ/V in it.
    let (lo, hi) = (0.004, 0.006);
    let inside = counted
        .iter()
        .filter(|x| x.0.ti >= lo && x.0.ti < hi)
        .count();
    assert!(inside > 0 && inside < counted.len(), "{inside}");
    let (_, ti) = panel
        .get(&format!(
            "/api/turbines/T-1/power-curve?{range}&ti_min={lo}&ti_max={hi}"
        ))
        .await;
    let ti: serde_json::Value = serde_json::from_str(&ti).unwrap();
    assert_eq!(ti["intervals"].as_u64(), Some(inside as u64), "{ti}");
    let (status, bad) = panel
        .get(&format!("/api/turbines/T-1/power-curve?{range}&ti_min=0.2"))
        .await;
    assert_eq!(status, 400, "{bad}");

    // The wind rose: every interval, by its mean direction (12 sectors, 0 centred on north)
    // and its raw mean wind's class.
    let (status, rose) = panel
        .get(&format!("/api/turbines/T-1/wind-rose?{range}"))
        .await;
    assert_eq!(status, 200, "{rose}");
    let rose: serde_json::Value = serde_json::from_str(&rose).unwrap();
    let mut want = vec![[0i64; 5]; 12];
    for (m, _, _) in &by_hand {
        let sector = (((m.dir + 15.0).rem_euclid(360.0)) / 30.0).floor() as usize % 12;
        let class = [4.0, 8.0, 12.0, 16.0]
            .iter()
            .take_while(|&&x| m.wind >= x)
            .count();
        want[sector][class] += 1;
    }
    let got: Vec<[i64; 5]> = rose["sectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| serde_json::from_value(s["counts"].clone()).unwrap())
        .collect();
    assert_eq!(got, want, "{rose}");
    let (status, _) = panel
        .get(&format!("/api/turbines/T-1/wind-rose?{range}&sectors=7"))
        .await;
    assert_eq!(status, 400);

    // The hot turbine: no density, no interval in its curve; its page still answers.
    let (status, hot) = panel
        .get(&format!("/api/turbines/T-2/power-curve?{range}"))
        .await;
    assert_eq!(status, 200, "{hot}");
    assert!(hot.contains("\"intervals\":0"), "{hot}");

    for id in ["T-3", "T-4"] {
        let (status, wild) = panel
            .get(&format!("/api/turbines/{id}/power-curve?{range}"))
            .await;
        assert_eq!(status, 200, "{wild}");
        assert!(wild.contains("\"intervals\":0"), "{wild}");
        let (status, page) = panel.get(&format!("/turbines/{id}?{range}")).await;
        assert_eq!(status, 200, "{page}");
    }

    // The page says what the winds are, the completeness and the AEP table, and draws the rose.
    let (_, page) = panel.get(&format!("/turbines/T-1?{range}")).await;
    for want in [
        "wind normalised to 1.225 kg/m³",
        "Database not complete",
        "Rayleigh 7 m/s",
        "site Weibull A 7.5, k 2.1",
        "aria-label=\"wind rose\"",
    ] {
        assert!(page.contains(want), "{want}: {page}");
    }

    // The exports: the curve's rows carry TI, Cp and u_A; --aep the table, as the API gives it.
    let (from, to) = (
        start.to_rfc3339(),
        (start + chrono::Duration::hours(4)).to_rfc3339(),
    );
    // One turbine's export over the range as JSON lines, `what` the kind asked.
    let export = |turbine: &str, what: &[&str]| {
        let mut args = vec!["export", "--turbine", turbine, "--from", &from, "--to", &to];
        args.extend(what);
        args.extend(["--format", "jsonl"]);
        stdout_jsonl(&d.command(&args))
    };
    let rows = export("T-1", &["--power-curve"]);
    assert_eq!(rows.len(), bins.len());
    for (r, b) in rows.iter().zip(api["bins"].as_array().unwrap()) {
        for k in ["mean_ti", "cp", "u_a", "mean_wind"] {
            assert_eq!(r[k], b[k], "{k}: {r} against {b}");
        }
        assert_eq!(r["basis"], "wind normalised to 1.225 kg/m³");
    }
    // The intervals' export: each one's density and normalised wind, as the curve took them.
    let rows = export("T-1", &["--only-stored"]);
    assert_eq!(rows.len(), sent.len());
    for (r, (m, vn, _)) in rows.iter().zip(&by_hand) {
        let rho = pressure() / 287.05 / (m.temp + 273.15);
        close(
            r["air_density"].as_f64().unwrap(),
            rho,
            "the interval's density",
        );
        close(
            r["wind_speed_ms_normalised"].as_f64().unwrap(),
            *vn,
            "its normalised wind",
        );
    }
    let hot = export("T-2", &["--only-stored"]);
    assert!(
        hot[0]["air_density"].is_null() && hot[0]["wind_speed_ms_normalised"].is_null(),
        "{}",
        hot[0]
    );
    let all = d.command(&["export", "--aep", "--from", &from, "--to", &to]);
    assert!(
        all.status.success(),
        "{}",
        String::from_utf8_lossy(&all.stderr)
    );
    let rows = export("T-1", &["--aep"]);
    assert_eq!(rows.len(), 9);
    for (r, a) in rows.iter().zip(iec["aep"].as_array().unwrap()) {
        assert_eq!(r["aep_measured_kwh"], a["measured"], "{r}");
        assert_eq!(r["aep_reference_kwh"], a["reference"], "{r}");
        assert_eq!(r["ratio"], a["ratio"], "{r}");
        assert_eq!(r["database_complete"], false, "{r}");
        assert!(r["aep_measured_incomplete"].is_boolean(), "{r}");
    }
}
