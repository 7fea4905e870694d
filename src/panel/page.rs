//! Page: the panel's HTML (the fleet and one turbine), and the JSON of the readings API. Pure:
//! data in, text out.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::chart::{esc, Chart, Stat};
use super::data::{Point, Quarantined, Sort, Status, FLEET_LIMIT};
use super::window::{Window, PRESETS};

const STYLE: &str = "
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#14324a;color:#fff;padding:10px 24px;display:flex;gap:24px;align-items:baseline}
header a{color:#fff;text-decoration:none;font-weight:600}
main{padding:16px 24px;max-width:1100px}
h1{font-size:22px;margin:8px 0}
table{border-collapse:collapse;font-size:14px;background:#fff}
th,td{padding:4px 10px;border-bottom:1px solid #e5e5e5;text-align:left;white-space:nowrap}
th a{color:#14324a}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.suspect{color:#d62728;font-weight:600}
.ok{color:#2a7d2a}
.presets a,.presets b{margin-right:12px}
.card{background:#fff;border:1px solid #e5e5e5;border-radius:6px;padding:8px 12px;margin:12px 0}
.muted{color:#666}
form{margin:8px 0}
";

fn layout(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · Galewatch</title><style>{STYLE}</style></head><body>\
         <header><a href=\"/\">Galewatch</a><span>turbine panel (read-only)</span></header>\
         <main>{body}</main></body></html>",
        esc(title)
    )
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.digits$}"))
}

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// The fleet page.
pub fn fleet(rows: &[Status], total: i64, prefix: &str, sort: Sort, desc: bool) -> String {
    let mut b = String::new();
    b.push_str("<h1>Fleet</h1>");
    b.push_str(&format!(
        "<form method=\"get\" action=\"/\"><label>Turbine id starts with \
         <input name=\"prefix\" value=\"{}\" autofocus></label>\
         <input type=\"hidden\" name=\"sort\" value=\"{}\"> <button>Filter</button></form>",
        esc(prefix),
        sort.as_str()
    ));
    let shown = rows.len() as i64;
    b.push_str(&format!(
        "<p class=\"muted\">{total} turbine{}{}; times UTC. Click a column to sort.</p>",
        if total == 1 { "" } else { "s" },
        if total > shown {
            format!(", the first {FLEET_LIMIT} shown: filter by prefix for the rest")
        } else {
            String::new()
        }
    ));
    b.push_str("<table><thead><tr>");
    for (s, label) in
        Sort::ALL
            .iter()
            .zip(["turbine", "last seen", "power kW", "clock", "quarantined"])
    {
        // Clicking the current column flips the order.
        let next_desc = if *s == sort { !desc } else { *s != Sort::Id };
        let arrow = match (*s == sort, desc) {
            (true, false) => " ▲",
            (true, true) => " ▼",
            _ => "",
        };
        b.push_str(&format!(
            "<th><a href=\"/?prefix={}&amp;sort={}&amp;desc={next_desc}\">{label}{arrow}</a></th>",
            url_escape(prefix),
            s.as_str()
        ));
    }
    b.push_str("</tr></thead><tbody>");
    for r in rows {
        let clock = if r.clock_suspect {
            "<span class=\"suspect\">suspect</span>".to_string()
        } else {
            "<span class=\"ok\">ok</span>".to_string()
        };
        b.push_str(&format!(
            "<tr><td><a href=\"/turbines/{}\">{}</a></td><td>{}</td><td class=\"num\">{}</td>\
             <td>{clock} <span class=\"muted\">{}</span></td><td class=\"num\">{}</td></tr>",
            url_escape(&r.turbine_id),
            esc(&r.turbine_id),
            when(r.last_seen),
            opt(r.power_kw, 1),
            r.clock_offset_seconds
                .map_or(String::new(), |o| format!("offset {o:.1}s")),
            if r.quarantined > 0 {
                format!("<span class=\"suspect\">{}</span>", r.quarantined)
            } else {
                "0".into()
            }
        ));
    }
    b.push_str("</tbody></table>");
    layout("Fleet", &b)
}

/// The turbine page: three charts with the quarantined readings marked, and the list.
pub fn turbine(
    id: &str,
    status: Option<&Status>,
    w: &Window,
    preset: Option<&str>,
    points: &[Point],
    quarantined: &[Quarantined],
) -> String {
    let mut b = String::new();
    b.push_str(&format!("<h1>Turbine {}</h1>", esc(id)));
    if let Some(s) = status {
        b.push_str(&format!(
            "<p>Last seen {} UTC · latest power {} kW · clock {} · {} unresolved in quarantine</p>",
            when(s.last_seen),
            opt(s.power_kw, 1),
            if s.clock_suspect {
                format!(
                    "<span class=\"suspect\">suspect</span> (offset {} s, drift {} s/day)",
                    opt(s.clock_offset_seconds, 1),
                    opt(s.clock_drift_seconds_per_day, 0)
                )
            } else {
                "<span class=\"ok\">ok</span>".into()
            },
            s.quarantined
        ));
    }
    b.push_str("<p class=\"presets\">");
    for (name, _) in PRESETS {
        if preset == Some(name) {
            b.push_str(&format!("<b>{name}</b>"));
        } else {
            b.push_str(&format!(
                "<a href=\"/turbines/{}?range={name}\">{name}</a>",
                url_escape(id)
            ));
        }
    }
    b.push_str(&format!(
        "<span class=\"muted\">{} – {} UTC, {}</span></p>",
        when(w.from),
        when(w.to),
        match w.step {
            None => format!("{} raw readings", points.len()),
            Some(s) => format!(
                "{} buckets of {}, min–max band and average",
                points.len(),
                humantime::format_duration(s)
            ),
        }
    ));
    b.push_str(&format!(
        "<form method=\"get\"><label>from <input name=\"from\" value=\"{}\" size=\"22\"></label> \
         <label>to <input name=\"to\" value=\"{}\" size=\"22\"></label> <button>Show</button></form>",
        w.from.to_rfc3339(),
        w.to.to_rfc3339()
    ));
    let max_gap = match w.step {
        Some(s) => chrono::Duration::seconds(3 * s.as_secs() as i64),
        None => chrono::Duration::seconds(30),
    };
    let markers: Vec<_> = quarantined.iter().map(|q| q.recorded_at).collect();
    type Pick = fn(&Point) -> Option<Stat>;
    let series: [(&str, &str, &str, Pick); 3] = [
        ("power_kw", "Power", "kW", |p| Some(p.power_kw)),
        ("wind_speed_ms", "Wind speed", "m/s", |p| p.wind_speed_ms),
        ("rotor_rpm", "Rotor speed", "rpm", |p| p.rotor_rpm),
    ];
    for (name, title, unit, pick) in series {
        let pts: Vec<_> = points.iter().map(|p| (p.t, pick(p))).collect();
        b.push_str("<div class=\"card\">");
        b.push_str(
            &Chart {
                series: name,
                title,
                unit,
                from: w.from,
                to: w.to,
                points: &pts,
                max_gap,
                markers: &markers,
            }
            .svg(),
        );
        b.push_str("</div>");
    }
    b.push_str(&format!(
        "<h2>Quarantined readings in this range ({})</h2>",
        quarantined.len()
    ));
    if quarantined.is_empty() {
        b.push_str("<p class=\"muted\">None.</p>");
    } else {
        b.push_str(
            "<table id=\"quarantine\"><thead><tr><th>id</th><th>recorded_at (UTC)</th><th>reason</th>\
             <th>incoming kW / m/s / rpm</th><th>stored kW / m/s / rpm</th><th>received</th>\
             <th>resolution</th></tr></thead><tbody>",
        );
        for q in quarantined {
            b.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{} / {} / {}</td>\
                 <td class=\"num\">{} / {} / {}</td><td>{}</td><td>{}</td></tr>",
                q.id,
                when(q.recorded_at),
                esc(&q.reason),
                opt(Some(q.power_kw), 1),
                opt(q.wind_speed_ms, 1),
                opt(q.rotor_rpm, 1),
                opt(q.existing_power_kw, 1),
                opt(q.existing_wind_speed_ms, 1),
                opt(q.existing_rotor_rpm, 1),
                when(q.received_at),
                q.resolution.as_deref().map_or_else(
                    || format!(
                        "open: <code>galewatch quarantine resolve {} --keep …</code>",
                        q.id
                    ),
                    esc
                )
            ));
        }
        b.push_str("</tbody></table>");
    }
    layout(&format!("Turbine {id}"), &b)
}

fn stat_json(s: Option<Stat>) -> Value {
    s.map_or(
        Value::Null,
        |s| json!({"min": s.min, "avg": s.avg, "max": s.max}),
    )
}

/// The readings API's answer.
pub fn readings_json(id: &str, w: &Window, points: &[Point], quarantined: &[Quarantined]) -> Value {
    let pts: Vec<Value> = match w.step {
        None => points
            .iter()
            .map(|p| {
                json!({
                    "t": p.t,
                    "power_kw": p.power_kw.avg,
                    "wind_speed_ms": p.wind_speed_ms.map(|s| s.avg),
                    "rotor_rpm": p.rotor_rpm.map(|s| s.avg),
                })
            })
            .collect(),
        Some(_) => points
            .iter()
            .map(|p| {
                json!({
                    "t": p.t,
                    "n": p.n,
                    "power_kw": stat_json(Some(p.power_kw)),
                    "wind_speed_ms": stat_json(p.wind_speed_ms),
                    "rotor_rpm": stat_json(p.rotor_rpm),
                })
            })
            .collect(),
    };
    json!({
        "turbine_id": id,
        "from": w.from,
        "to": w.to,
        "resolution": if w.step.is_some() { "bucketed" } else { "raw" },
        "step_seconds": w.step.map(|s| s.as_secs()),
        "points": pts,
        "quarantine": quarantined,
    })
}

/// Percent-encodes a path segment or query value.
pub fn url_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An error page.
pub fn error(status: u16, message: &str) -> String {
    layout(
        "Error",
        &format!(
            "<h1>{status}</h1><p>{}</p><p><a href=\"/\">Back to the fleet</a></p>",
            esc(message)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn stat(v: f64) -> Stat {
        Stat {
            min: v,
            avg: v,
            max: v,
        }
    }

    #[test]
    fn the_turbine_page_has_three_charts_and_marks_quarantine() {
        let w = Window {
            from: t("2026-11-30T00:00:00Z"),
            to: t("2026-11-30T01:00:00Z"),
            step: None,
        };
        let points: Vec<_> = (0..10)
            .map(|i| Point {
                t: w.from + chrono::Duration::seconds(2 * i),
                n: 1,
                power_kw: stat(100.0 + i as f64),
                wind_speed_ms: Some(stat(7.0)),
                rotor_rpm: None,
            })
            .collect();
        let q = Quarantined {
            id: 7,
            recorded_at: w.from + chrono::Duration::seconds(4),
            reason: "collision".into(),
            power_kw: 1.0,
            wind_speed_ms: None,
            rotor_rpm: None,
            existing_power_kw: Some(104.0),
            existing_wind_speed_ms: None,
            existing_rotor_rpm: None,
            received_at: w.from,
            resolution: None,
        };
        let html = turbine("WTG <1>", None, &w, Some("1h"), &points, &[q]);
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 3);
        assert_eq!(html.matches("class=\"quarantine-marker\"").count(), 3);
        assert!(html.contains("Turbine WTG &lt;1&gt;"));
        assert!(html.contains("galewatch quarantine resolve 7"));
        assert!(html.contains("no readings in this range"), "rotor has none");
        assert!(html.contains("<b>1h</b>"));
    }

    #[test]
    fn json_shapes() {
        let w = Window {
            from: t("2026-11-30T00:00:00Z"),
            to: t("2026-11-30T01:00:00Z"),
            step: Some(std::time::Duration::from_secs(60)),
        };
        let p = Point {
            t: w.from,
            n: 30,
            power_kw: Stat {
                min: 1.0,
                avg: 2.0,
                max: 3.0,
            },
            wind_speed_ms: None,
            rotor_rpm: Some(stat(9.0)),
        };
        let v = readings_json("A", &w, &[p], &[]);
        assert_eq!(v["resolution"], "bucketed");
        assert_eq!(v["step_seconds"], 60);
        assert_eq!(v["points"][0]["n"], 30);
        assert_eq!(v["points"][0]["power_kw"]["max"], 3.0);
        assert!(v["points"][0]["wind_speed_ms"].is_null());
        assert_eq!(url_escape("a b/ü"), "a%20b%2F%C3%BC");
    }
}
