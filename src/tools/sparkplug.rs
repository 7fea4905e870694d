//! `galewatch sparkplug metrics`: the metric names Sparkplug B births carry (as stored in
//! `sparkplug_births`) and what each feeds under the settings, so a metric that no signal maps,
//! and a signal whose metric no birth names, are seen by name rather than as a count.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::json;

use crate::core::shown::shown;
use crate::daemon::config::Config;
use crate::error::Error;
use crate::intake::sparkplug::proto::datatype;
use crate::intake::sparkplug::{Feed, Mapping};
use crate::sink::births::{self, Stored};
use crate::tools::review::Format;

/// Which births to list: all (summarised by metric name) or one node's or device's.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub edge_node: Option<String>,
    pub device: Option<String>,
    /// List the withdrawn births (whose last birth was refused), one a line, instead of the
    /// metrics.
    pub withdrawn: bool,
}

/// Withdrawn births the summary names before it says how many more there are.
const WITHDRAWN_NAMED: usize = 5;

impl Filter {
    fn keeps(&self, b: &Stored) -> bool {
        self.edge_node.as_ref().is_none_or(|n| *n == b.edge_node)
            && self.device.as_ref().is_none_or(|d| *d == b.device)
    }

    fn any(&self) -> bool {
        self.edge_node.is_some() || self.device.is_some()
    }
}

/// What a metric feeds, in words.
fn feeds(
    cfg: &Config,
    map: Option<&Mapping>,
    device: bool,
    name: &str,
) -> (Option<String>, &'static str) {
    let signals = &cfg.rules.limits.signals;
    match map.map(|m| m.feeds(device, name)) {
        None => (None, "Sparkplug B is off (sparkplug_group_id is empty)"),
        Some(Feed::Signal(i)) => (Some(signals.get(i).name.clone()), ""),
        Some(Feed::NotMapped) => (
            None,
            "not mapped: no signal takes this name (sparkplug_metrics)",
        ),
        Some(Feed::LevelNamesNoTurbine(i)) => (
            Some(signals.get(i).name.clone()),
            if device {
                "a device's metric, but sparkplug_turbine names turbines by edge node: no reading"
            } else {
                "a node's own metric, but sparkplug_turbine names turbines by device: no reading"
            },
        ),
    }
}

/// A birth's level as printed: group/node[/device], its device-given text escaped.
fn level(b: &Stored) -> String {
    let raw = if b.device.is_empty() {
        format!("{}/{}", b.group_id, b.edge_node)
    } else {
        format!("{}/{}/{}", b.group_id, b.edge_node, b.device)
    };
    shown(&raw).into_owned()
}

/// The signal a birth's metric feeds, if any.
fn signal_of(cfg: &Config, map: Option<&Mapping>, b: &Stored, name: &str) -> Option<String> {
    feeds(cfg, map, !b.device.is_empty(), name).0
}

/// ", but …" when a metric feeding `signal` has a data type whose values that signal refuses.
fn misfit(cfg: &Config, signal: Option<&str>, types: &[u32]) -> String {
    let signals = &cfg.rules.limits.signals;
    let Some(s) = signal
        .and_then(|n| signals.position(n))
        .map(|i| signals.get(i))
    else {
        return String::new();
    };
    let bad: Vec<&str> = types
        .iter()
        .filter(|t| !crate::intake::sparkplug::datatype_fits(s.kind, **t))
        .map(|t| datatype::name(*t))
        .collect();
    if bad.is_empty() {
        String::new()
    } else {
        format!(
            ", but a {} signal refuses every {} value: fix the signal's type or the mapping",
            s.kind.as_str(),
            bad.join("/")
        )
    }
}

/// One metric name across the births that carry it.
#[derive(Default)]
struct Seen {
    datatypes: std::collections::BTreeSet<&'static str>,
    types: Vec<u32>,
    births: usize,
    /// Births at a device's level and at a node's own.
    on_devices: bool,
    on_nodes: bool,
}

/// `galewatch sparkplug metrics`: the stored births of this daemon's session (`mqtt_client_id`).
/// Without a filter, one line per metric name (its data types, how many births name it, what it
/// feeds), then the declared signals no stored birth feeds; with `--edge-node`/`--device`, each
/// matching birth's metrics with their aliases.
pub async fn metrics(cfg: &Config, filter: &Filter, format: Format) -> Result<String, Error> {
    let db = cfg.db.open().await?;
    let all = births::newest(&db, &cfg.settings.broker.mqtt_client_id).await?;
    let kept: Vec<&Stored> = all.iter().filter(|b| filter.keeps(b)).collect();
    let map = cfg.sparkplug.as_ref();
    if filter.withdrawn {
        return Ok(withdrawn_list(&kept, format));
    }
    if filter.any() {
        return Ok(detail(cfg, map, &kept, format));
    }
    let mut names: BTreeMap<&str, Seen> = BTreeMap::new();
    for b in &kept {
        for (_, name, t) in b.metrics.iter().filter(|_| !b.withdrawn) {
            let seen = names.entry(name).or_default();
            seen.datatypes.insert(datatype::name(*t as u32));
            if !seen.types.contains(&(*t as u32)) {
                seen.types.push(*t as u32);
            }
            seen.births += 1;
            seen.on_devices |= !b.device.is_empty();
            seen.on_nodes |= b.device.is_empty();
        }
    }
    let unfed = unfed_signals(cfg, map, &kept);
    let withdrawn: Vec<String> = kept
        .iter()
        .filter(|b| b.withdrawn)
        .map(|b| level(b))
        .collect();
    let rows: Vec<Row<'_>> = names
        .iter()
        .map(|(name, seen)| {
            // A name on both levels is judged where it feeds a reading, if it does anywhere.
            let (signal, why) = [seen.on_devices, seen.on_nodes]
                .iter()
                .zip([true, false])
                .filter(|(on, _)| **on)
                .map(|(_, device)| feeds(cfg, map, device, name))
                .min_by_key(|(_, why)| !why.is_empty())
                .unwrap_or((None, ""));
            (*name, seen, signal, why)
        })
        .collect();
    Ok(match format {
        Format::Json => {
            let metrics: Vec<_> = rows
                .iter()
                .map(|(name, seen, signal, why)| {
                    json!({
                        "metric": name,
                        "datatypes": seen.datatypes.iter().collect::<Vec<_>>(),
                        "births": seen.births,
                        "signal": signal,
                        "feeds_readings": why.is_empty() && signal.is_some(),
                        "note": (!why.is_empty()).then_some(*why),
                    })
                })
                .collect();
            let unfed: Vec<_> = unfed
                .iter()
                .map(|(s, by)| json!({"signal": s, "metrics": by}))
                .collect();
            serde_json::to_string_pretty(&json!({
                "births": kept.len(),
                "metrics": metrics,
                "signals_no_birth_feeds": unfed,
                "withdrawn": withdrawn,
            }))
            .unwrap_or_default()
        }
        Format::Table => table(cfg, &rows, &unfed, kept.len(), &withdrawn),
    })
}

/// The declared signals no stored birth feeds, each with the metric names that would.
fn unfed_signals(
    cfg: &Config,
    map: Option<&Mapping>,
    kept: &[&Stored],
) -> Vec<(String, Vec<String>)> {
    let signals = &cfg.rules.limits.signals;
    let fed: std::collections::HashSet<usize> = kept
        .iter()
        .filter(|b| !b.withdrawn)
        .flat_map(|b| {
            b.metrics
                .iter()
                .filter_map(|(_, n, _)| match map?.feeds(!b.device.is_empty(), n) {
                    Feed::Signal(i) => Some(i),
                    _ => None,
                })
        })
        .collect();
    match map {
        None => Vec::new(),
        Some(m) => (0..signals.len())
            .filter(|i| !fed.contains(i))
            .map(|i| {
                let mut by: Vec<String> = m
                    .signals
                    .iter()
                    .filter(|(_, &s)| s == i)
                    .map(|(n, _)| n.clone())
                    .collect();
                by.sort();
                (signals.get(i).name.clone(), by)
            })
            .collect(),
    }
}

/// One metric name's line: its name, the birth data types, how many births carry it, what it
/// feeds (a signal, or why none).
type Row<'a> = (&'a str, &'a Seen, Option<String>, &'static str);

/// The summary as a table: a line per metric name, then the signals no birth feeds and the
/// withdrawn births (a few named, and how many in all).
fn table(
    cfg: &Config,
    rows: &[Row<'_>],
    unfed: &[(String, Vec<String>)],
    births: usize,
    withdrawn: &[String],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<32} {:<24} {:>7}  feeds",
        "metric", "type", "births"
    );
    for (name, seen, signal, why) in rows {
        let types: Vec<&str> = seen.datatypes.iter().copied().collect();
        let to = match (signal, why.is_empty()) {
            (Some(s), true) => s.clone(),
            (Some(s), false) => format!("- ({s}: {why})"),
            (None, _) => format!("- ({why})"),
        };
        let _ = writeln!(
            out,
            "{:<32} {:<24} {:>7}  {to}{}",
            shown(name),
            types.join(","),
            seen.births,
            misfit(cfg, signal.as_deref(), &seen.types)
        );
    }
    let _ = write!(
        out,
        "{} metric name(s) in {births} stored birth(s) of session {:?}",
        rows.len(),
        cfg.settings.broker.mqtt_client_id
    );
    for (s, by) in unfed {
        let by = if by.is_empty() {
            "no metric maps to it".to_string()
        } else {
            let by: Vec<_> = by.iter().map(|b| shown(b)).collect();
            format!("expects metric {}", by.join(" or "))
        };
        let _ = write!(out, "\nsignal {s} is fed by no stored birth ({by})");
    }
    if !withdrawn.is_empty() {
        let named: Vec<&str> = withdrawn
            .iter()
            .take(WITHDRAWN_NAMED)
            .map(String::as_str)
            .collect();
        let more = if withdrawn.len() > named.len() {
            format!(
                ", and {} more (--withdrawn lists them all)",
                withdrawn.len() - named.len()
            )
        } else {
            String::new()
        };
        let _ = write!(
            out,
            "\n{} withdrawn birth(s) (the last birth was refused; the next is awaited): {}{more}",
            withdrawn.len(),
            named.join(", ")
        );
    }
    out
}

/// `--withdrawn`: each withdrawn birth, one a line (or a JSON list).
fn withdrawn_list(kept: &[&Stored], format: Format) -> String {
    let gone: Vec<&&Stored> = kept.iter().filter(|b| b.withdrawn).collect();
    match format {
        Format::Json => serde_json::to_string_pretty(
            &gone
                .iter()
                .map(|b| {
                    json!({"group_id": b.group_id, "edge_node": b.edge_node, "device": b.device,
                           "received_at": b.received_at})
                })
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default(),
        Format::Table => {
            let mut out = String::new();
            for b in &gone {
                let _ = writeln!(
                    out,
                    "{}  born {}",
                    level(b),
                    b.received_at.format("%Y-%m-%d %H:%M:%S")
                );
            }
            let _ = write!(out, "{} withdrawn birth(s)", gone.len());
            out
        }
    }
}

/// Each birth's metrics, alias by alias.
fn detail(cfg: &Config, map: Option<&Mapping>, kept: &[&Stored], format: Format) -> String {
    let line = |b: &Stored, alias: i64, name: &str, t: i32| {
        let (signal, why) = feeds(cfg, map, !b.device.is_empty(), name);
        (
            alias,
            name.to_string(),
            datatype::name(t as u32),
            signal,
            why,
        )
    };
    match format {
        Format::Json => {
            let list: Vec<_> = kept
                .iter()
                .map(|b| {
                    let metrics: Vec<_> = b
                        .metrics
                        .iter()
                        .map(|(a, n, t)| {
                            let (alias, name, ty, signal, why) = line(b, *a, n, *t);
                            json!({"alias": alias, "metric": name, "datatype": ty, "signal": signal,
                                   "feeds_readings": why.is_empty() && signal.is_some(),
                                   "note": (!why.is_empty()).then_some(why)})
                        })
                        .collect();
                    json!({"group_id": b.group_id, "edge_node": b.edge_node, "device": b.device,
                           "withdrawn": b.withdrawn, "received_at": b.received_at, "metrics": metrics})
                })
                .collect();
            serde_json::to_string_pretty(&list).unwrap_or_default()
        }
        Format::Table => {
            let mut out = String::new();
            for b in kept {
                let state = if b.withdrawn {
                    " (withdrawn: the last birth was refused)"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "{}  born {}{state}",
                    level(b),
                    b.received_at.format("%Y-%m-%d %H:%M:%S")
                );
                for (a, n, t) in &b.metrics {
                    let (alias, name, ty, signal, why) = line(b, *a, n, *t);
                    let to = match (signal, why.is_empty()) {
                        (Some(s), true) => s,
                        (Some(s), false) => format!("- ({s}: {why})"),
                        (None, _) => format!("- ({why})"),
                    };
                    let _ = writeln!(
                        out,
                        "  {alias:>6}  {:<32} {ty:<10} {to}{}",
                        shown(&name),
                        misfit(cfg, signal_of(cfg, map, b, &name).as_deref(), &[*t as u32])
                    );
                }
            }
            let _ = write!(out, "{} birth(s)", kept.len());
            out
        }
    }
}
