//! The fleet page: a line per turbine (its clock, backlog, missing signals, day's quality,
//! availability and deviation), sortable by each column, with the fleet's figures above it.

use super::*;

/// The fleet page. `headline` is the label of the signal shown per turbine (its latest value).
pub fn fleet(
    rows: &[Status],
    total: i64,
    prefix: &str,
    sort: Sort,
    desc: bool,
    headline: &str,
    figures: &crate::panel::data::FleetFigures,
) -> String {
    let body = html! {
        h1 { "Fleet" }
        form method="get" action="/" {
            label {
                "Turbine id starts with "
                input.mono name="prefix" value=(prefix) style=(format!("width:{}ch", prefix.chars().count().max(20) + 1)) autofocus;
            }
            input type="hidden" name="sort" value=(sort.as_str());
            " "
            button { "Filter" }
        }
        (fleet_intro(rows, total, figures))
        table #fleet {
            (fleet_head(prefix, sort, desc, headline, figures))
            tbody {
                @for r in rows {
                    (fleet_row(r, headline, figures))
                }
            }
        }
    };
    layout("Fleet", body)
}

/// The fleet page's words above its table: how many turbines, the fleet's availability, and
/// what is not kept.
fn fleet_intro(rows: &[Status], total: i64, figures: &crate::panel::data::FleetFigures) -> Markup {
    let shown = rows.len() as i64;
    let pct = |a: Option<f64>| a.map_or("—".to_string(), |a| format!("{:.2} %", 100.0 * a));
    html! {
    p.muted {
        (total) " turbine" @if total != 1 { "s" }
        @if total > shown { ", the first " (FLEET_LIMIT) " shown: filter by prefix for the rest" }
        "; times UTC. Click a column to sort."
        @if figures.kept {
            " Availability (IEC 61400-26-1, time-based) of the turbines listed: "
            span.num { (pct(figures.availability_yesterday)) } " yesterday, "
            span.num { (pct(figures.availability_month)) } " this month."
            @if figures.production_yesterday.is_some() || figures.production_month.is_some() {
                " Production-based (IEC 61400-26-2): "
                span.num { (pct(figures.production_yesterday)) } " yesterday, "
                span.num { (pct(figures.production_month)) } " this month."
            }
        } @else {
            " "
            span.not-kept title="docs/stats.md, Availability" {
                "Availability is not kept: no status signal is declared (availability_status_signal and availability_categories)."
            }
        }
        @if !figures.curve {
            " "
            span.not-kept title="docs/stats.md, Power curve" {
                "No power curve: its wind and power signals (power_curve_wind_signal, power_curve_power_signal) are not both declared, or statistics are off."
            }
        }
        @if rows.first().is_some_and(|r| r.missing.is_none()) {
            " Which signals their readings lack is not known: statistics are off."
        } @else {
            " Under an id, its last 24 h: the declared signals none of its readings carried, completeness under 90 %, intervals flagged."
        }
    }
    }
}

/// The fleet table's head: a link per column that sorts by it (again: the other way).
fn fleet_head(
    prefix: &str,
    sort: Sort,
    desc: bool,
    headline: &str,
    figures: &crate::panel::data::FleetFigures,
) -> Markup {
    html! {
    thead {
        tr {
            @for (s, label) in Sort::ALL.iter().zip(["turbine", "last seen", headline, "clock", "quarantined"]) {
                // Clicking the current column flips the order.
                @let next_desc = if *s == sort { !desc } else { *s != Sort::Id };
                @let arrow = match (*s == sort, desc) {
                    (true, false) => " ▲",
                    (true, true) => " ▼",
                    _ => "",
                };
                th {
                    a href=(format!("/?prefix={}&sort={}&desc={next_desc}", url_escape(prefix), s.as_str())) {
                        (label) (arrow)
                    }
                }
            }
            @if figures.kept {
                @let next_desc = sort == Sort::Availability && !desc;
                th title="time-based availability, yesterday (UTC) and this month; sorted by yesterday's, the least available first" {
                    a href=(format!("/?prefix={}&sort=availability&desc={next_desc}", url_escape(prefix))) {
                        "avail."
                        @if sort == Sort::Availability { @if desc { " ▼" } @else { " ▲" } }
                    }
                }
            }
            @if figures.curve {
                @let next_desc = sort == Sort::Deviation && !desc;
                th title="yesterday's energy against the reference power curve at the wind it had" {
                    a href=(format!("/?prefix={}&sort=deviation&desc={next_desc}", url_escape(prefix))) {
                        "curve"
                        @if sort == Sort::Deviation { @if desc { " ▼" } @else { " ▲" } }
                    }
                }
            }
        }
    }
    }
}

/// One turbine's row of the fleet table.
fn fleet_row(r: &Status, headline: &str, figures: &crate::panel::data::FleetFigures) -> Markup {
    html! {
        tr {
            td.id {
                a href=(format!("/turbines/{}", url_escape(&r.turbine_id))) { (r.turbine_id) }
                @if let Some(m) = r.missing.as_deref().filter(|m| !m.is_empty()) {
                    br;
                    span.suspect title="declared signals that none of its readings of the last 24 h carried" {
                        "lacks " (m.join(", "))
                    }
                }
                (day_quality(r))
            }
            td.t data-label="last seen" { (when(r.last_seen)) }
            td.num data-label=(headline) { (opt(r.headline, 1)) }
            td data-label="clock" {
                (clock_word(r.clock_suspect)) " "
                span.muted.t {
                    @if let Some(why) = &r.clock_suspect_because { (why) }
                    @else if let Some(o) = r.clock_offset_seconds { "offset " (format!("{o:.1}")) "s" }
                }
            }
            td.num data-label="quarantined" {
                @if r.quarantined > 0 { span.suspect { (r.quarantined) } } @else { "0" }
            }
            @if figures.kept {
                td.num data-label="availability" { (availability_cell(r)) }
            }
            @if figures.curve {
                td.num data-label="curve" {
                    @match r.deviation {
                        Some(d) if d < -0.02 => span.suspect { (format!("{:+.1} %", 100.0 * d)) },
                        Some(d) => (format!("{:+.1} %", 100.0 * d)),
                        None => span.muted { "—" },
                    }
                    @if let Some(p) = r.production_yesterday {
                        br;
                        span.muted title="production-based availability yesterday (IEC 61400-26-2)" { (format!("{:.1} %", 100.0 * p)) " prod." }
                    }
                    @if let Some(p) = r.production_month {
                        br;
                        span.muted title="production-based availability this month so far (IEC 61400-26-2)" { (format!("{:.1} %", 100.0 * p)) " month" }
                    }
                }
            }
        }
    }
}

/// The fleet page's availability cell: yesterday's, and this month's below it.
fn availability_cell(r: &Status) -> Markup {
    let pct = |a: f64| format!("{:.1} %", 100.0 * a);
    html! {
        @match r.availability_yesterday {
            Some(a) if a < crate::sink::quality::AVAILABILITY_BELOW => span.suspect { (pct(a)) },
            Some(a) => (pct(a)),
            None => span.muted { "—" },
        }
        @if let Some(m) = r.availability_month {
            br;
            span.muted title="this month so far" { (pct(m)) " month" }
        }
    }
}

/// Under a turbine's id on the fleet page, its last 24 hours when anything is to be said:
/// completeness under 90 % and flagged intervals.
fn day_quality(r: &Status) -> Markup {
    let low = r.completeness.filter(|c| *c < 0.9);
    let flagged = r.flagged.filter(|f| *f > 0);
    html! {
        @if low.is_some() || flagged.is_some() {
            br;
            span.suspect title="the last 24 hours: readings over those expected, and intervals flagged stuck, implausible or absent" {
                @if let Some(c) = low { (format!("{:.0}", 100.0 * c)) " % complete" }
                @if low.is_some() && flagged.is_some() { ", " }
                @if let Some(f) = flagged { (f) " flagged" }
            }
        }
    }
}
