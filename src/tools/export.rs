//! Export: `galewatch export` (one turbine's interval statistics as CSV or JSON lines, for an
//! analyst's notebook) and `galewatch stats rebuild` (recompute a range from `readings`).
//!
//! The export streams rows from the database to the output as they come, so a year of
//! statistics (52,560 ten-minute rows) never sits in memory whole.
//!
//! A CSV is opened in spreadsheets, which run a cell starting with `=` as a formula: the turbine
//! id, free text from the payload, is written so that it stays text (OWASP's rule against CSV
//! injection) unless `--raw` asks for it as stored.

use std::io::Write;
use std::pin::pin;

use chrono::{DateTime, NaiveDate, Utc};
use futures_util::TryStreamExt;

use crate::daemon::config::Config;
use crate::error::Error;
use crate::sink::stats::{self, Sql};
use crate::tools::review::ReviewError;

/// The output format of `galewatch export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// A header line, then one line per interval; empty fields for NULL.
    Csv,
    /// One JSON object per interval and line; null for NULL.
    Jsonl,
}

/// Parses `--from`/`--to`: RFC 3339 (`2026-11-30T12:00:00Z`, any offset), a UTC date
/// (`2026-11-30`, its midnight) or Unix seconds.
pub fn parse_time(name: &str, s: &str) -> Result<DateTime<Utc>, String> {
    if let Some(t) = crate::panel::window::parse_instant(s) {
        return Ok(t);
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).expect("midnight").and_utc());
    }
    Err(format!(
        "bad --{name}: {s:?} is neither RFC 3339 (2026-11-30T12:00:00Z), a date (2026-11-30) nor Unix seconds"
    ))
}

/// The export's column names, in order: `turbine_id`, `interval_start` (RFC 3339, UTC),
/// `interval_seconds`, `readings`, then per numeric signal `{name}_n`, `{name}_mean`,
/// `{name}_min`, `{name}_max`, `{name}_std` (population standard deviation).
pub fn header(sql: &Sql) -> Vec<String> {
    let mut h: Vec<String> = [
        "turbine_id",
        "interval_start",
        "interval_seconds",
        "readings",
    ]
    .map(String::from)
    .into();
    for s in &sql.numeric {
        for suffix in ["n", "mean", "min", "max", "std"] {
            h.push(format!("{}_{suffix}", s.name));
        }
    }
    h
}

/// The statement behind the export: one turbine's intervals of the configured width in
/// `[$2, $3)`, in time order, with the standard deviation computed from `m2`.
fn export_sql(sql: &Sql) -> String {
    let mut cols = vec![
        "turbine_id".to_string(),
        "interval_start".into(),
        "interval_seconds".into(),
        "readings".into(),
    ];
    for s in &sql.numeric {
        let [n, mean, m2, min, max] = stats::column_names(s);
        cols.extend([
            format!("\"{n}\""),
            format!("\"{mean}\""),
            format!("\"{min}\""),
            format!("\"{max}\""),
            stats::std_sql(&format!("\"{m2}\""), &format!("\"{n}\"")),
        ]);
    }
    format!(
        "SELECT {} FROM interval_stats
 WHERE turbine_id = $1 AND interval_seconds = {} AND interval_start >= $2 AND interval_start < $3
 ORDER BY interval_start",
        cols.join(", "),
        sql.width.secs()
    )
}

/// A CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        quoted(s)
    } else {
        s.to_string()
    }
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// The first characters that make a spreadsheet read a cell as a formula: OWASP's list for CSV
/// injection (`=`, `+`, `-`, `@`, tab, carriage return), and the line feed, a line break like the
/// carriage return.
const FORMULA_STARTS: [char; 7] = ['=', '+', '-', '@', '\t', '\r', '\n'];

/// A CSV field of free text (a turbine id), which a spreadsheet must show and never run: one
/// starting with a formula character gets a leading `'` (a spreadsheet reads it as text, `'` included);
/// one holding a `;` is quoted besides, so that a spreadsheet splitting at `;` (the list separator
/// of many locales) cannot make a formula start of what follows it. `raw`: as stored (RFC 4180
/// quoting only), for notebooks and scripts. A leading space is no formula start: left alone.
pub fn text_cell(s: &str, raw: bool) -> String {
    if raw {
        csv_field(s)
    } else if s.starts_with(FORMULA_STARTS) {
        quote_for_spreadsheets(&format!("'{s}"))
    } else {
        quote_for_spreadsheets(s)
    }
}

fn quote_for_spreadsheets(s: &str) -> String {
    if s.contains(';') {
        quoted(s)
    } else {
        csv_field(s)
    }
}

/// One CSV line of the export's `fields` (in the order of [`header`]). The turbine id, the only
/// free text, is a [`text_cell`]; every other column the exporter writes itself (the interval's
/// RFC 3339 start, integers, numbers as serde_json prints them, `-3.5` included), unaltered, so
/// a spreadsheet reads numbers as numbers; NULL is an empty field.
pub fn csv_line(fields: &[serde_json::Value], raw: bool) -> String {
    fields
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            serde_json::Value::Null => String::new(),
            serde_json::Value::String(s) if i == TURBINE_COLUMN => text_cell(s, raw),
            serde_json::Value::String(s) => csv_field(s),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Where the turbine id is among the export's columns.
const TURBINE_COLUMN: usize = 0;

/// `galewatch export`: writes the intervals of `turbine` starting in `[from, to)` to `out`.
/// Returns the rows written. A reader that goes away (`| head`) ends the export quietly. `raw`:
/// CSV text cells as stored, not kept from being read as formulas (JSON lines always are).
pub async fn export(
    cfg: &Config,
    turbine: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    format: ExportFormat,
    raw: bool,
    out: &mut impl Write,
) -> Result<u64, ReviewError> {
    if from >= to {
        return Err(ReviewError::Refused(
            "--from must be before --to".to_string(),
        ));
    }
    let sql = cfg.stats_sql();
    let client = cfg.db.open().await?;
    let header = header(&sql);
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::BrokenPipe;
    let write_err = |e: std::io::Error| ReviewError::Refused(format!("writing the output: {e}"));
    if format == ExportFormat::Csv {
        match writeln!(out, "{}", header.join(",")) {
            Err(e) if gone(&e) => return Ok(0),
            r => r.map_err(write_err)?,
        }
    }
    let err = |e| Error::db("reading interval statistics", e);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&turbine, &from, &to];
    let rows = client
        .query_raw(&export_sql(&sql), params)
        .await
        .map_err(err)?;
    let mut rows = pin!(rows);
    let mut written = 0u64;
    while let Some(row) = rows.try_next().await.map_err(err)? {
        let mut fields: Vec<serde_json::Value> = Vec::with_capacity(header.len());
        fields.push(row.get::<_, String>(0).into());
        let start: DateTime<Utc> = row.get(1);
        fields.push(
            start
                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
                .into(),
        );
        fields.push(row.get::<_, i32>(2).into());
        fields.push(row.get::<_, i64>(3).into());
        for k in 0..sql.numeric.len() {
            let base = 4 + 5 * k;
            fields.push(row.get::<_, i64>(base).into());
            for j in 1..5 {
                fields.push(serde_json::json!(row.get::<_, Option<f64>>(base + j)));
            }
        }
        let line = match format {
            ExportFormat::Csv => csv_line(&fields, raw),
            ExportFormat::Jsonl => {
                let o: serde_json::Map<String, serde_json::Value> =
                    header.iter().cloned().zip(fields).collect();
                serde_json::Value::Object(o).to_string()
            }
        };
        match writeln!(out, "{line}") {
            Err(e) if gone(&e) => return Ok(written),
            r => r.map_err(write_err)?,
        }
        written += 1;
    }
    match out.flush() {
        Err(e) if gone(&e) => {}
        r => r.map_err(write_err)?,
    }
    Ok(written)
}

/// `galewatch stats rebuild`: recomputes the statistics of `[from, to)` (widened to whole
/// intervals; of one turbine or all) from `readings`. An interval some of whose raw readings
/// `readings_retention` dropped is never rebuilt from the part left: it is left as stored, and
/// counted in the answer (`stats::rebuild`). Idempotent.
pub async fn rebuild(
    cfg: &Config,
    turbine: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<String, ReviewError> {
    rebuild_as_of(cfg, turbine, from, to, None).await
}

/// [`rebuild`] as if the clock read `now` (which retention's cut-off follows; None: the system
/// clock): for tests.
pub async fn rebuild_as_of(
    cfg: &Config,
    turbine: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: Option<DateTime<Utc>>,
) -> Result<String, ReviewError> {
    if from >= to {
        return Err(ReviewError::Refused(
            "--from must be before --to".to_string(),
        ));
    }
    let sql = cfg.stats_sql();
    let retention = stats::Retention {
        keep: cfg.settings.partition_policy().retention,
        now,
    };
    let mut client = cfg.db.open().await?;
    let done = stats::rebuild(&mut client, &sql, from, to, turbine, &retention).await?;
    let mut out = format!(
        "rebuilt {} intervals of {}s for {} from {} to {} from readings",
        done.written,
        sql.width.secs(),
        turbine.unwrap_or("every turbine"),
        done.from
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        done.to.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
    );
    if done.skipped > 0 {
        out.push_str(&format!(
            "\nskipped {} intervals whose raw readings are partly gone (readings_retention dropped some of them): their statistics are kept as they were",
            done.skipped
        ));
    }
    if !cfg.settings.stats_enabled {
        out.push_str("\nnote: stats_enabled is false, so the daemon does not keep them current");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc_3339_dates_or_unix_seconds() {
        let t = |s: &str| parse_time("from", s);
        let want: DateTime<Utc> = "2026-11-30T00:00:00Z".parse().unwrap();
        assert_eq!(t("2026-11-30").unwrap(), want);
        assert_eq!(t("2026-11-30T01:00:00+01:00").unwrap(), want);
        assert_eq!(t(&want.timestamp().to_string()).unwrap(), want);
        for bad in ["yesterday", "2026-13-01", "", "2026-11-30 00:00"] {
            let e = t(bad).unwrap_err();
            assert!(e.contains("bad --from"), "{e}");
        }
    }

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("WTG-1"), "WTG-1");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
    }

    #[test]
    fn text_cells_starting_as_formulas_stay_text() {
        for c in ['=', '+', '-', '@', '\t', '\r', '\n'] {
            let s = format!("{c}1+1");
            let want = if c == '\r' || c == '\n' {
                format!("\"'{s}\"")
            } else {
                format!("'{s}")
            };
            assert_eq!(text_cell(&s, false), want, "{c:?}");
            assert_eq!(text_cell(&s, true), csv_field(&s), "{c:?} raw");
        }
        assert_eq!(text_cell("=cmd|calc", false), "'=cmd|calc");
        assert_eq!(text_cell("@SUM(1)", false), "'@SUM(1)");
        assert_eq!(
            text_cell(r#"=HYPERLINK("http:evil.example","click")"#, false),
            r#""'=HYPERLINK(""http:evil.example"",""click"")""#
        );
        assert_eq!(
            text_cell(r#"=HYPERLINK("http:evil.example","click")"#, true),
            r#""=HYPERLINK(""http:evil.example"",""click"")""#
        );
        // Not formula starts: a leading space, a letter, a digit, a quote, a fullwidth ＝.
        for s in [" =1", "WTG-1", "3-1", "'=1", "＝1"] {
            assert_eq!(text_cell(s, false), s, "{s:?}");
        }
        // Empty, and a turbine id that looks like a negative number: text, kept text.
        assert_eq!(text_cell("", false), "");
        assert_eq!(text_cell("-3.5", false), "'-3.5");
        // A `;` (a list separator in many locales) is quoted, unless raw.
        assert_eq!(text_cell("WTG;=1", false), "\"WTG;=1\"");
        assert_eq!(text_cell("WTG;=1", true), "WTG;=1");
    }

    #[test]
    fn numbers_the_exporter_writes_stay_numbers() {
        use serde_json::json;
        let fields = [
            json!("-3"),
            json!("2026-11-30T12:00:00Z"),
            json!(600),
            json!(-3),
            json!(-3.5),
            json!(null),
            json!(-0.0),
        ];
        assert_eq!(
            csv_line(&fields, false),
            "'-3,2026-11-30T12:00:00Z,600,-3,-3.5,,-0.0"
        );
        assert_eq!(
            csv_line(&fields, true),
            "-3,2026-11-30T12:00:00Z,600,-3,-3.5,,-0.0"
        );
    }

    #[test]
    fn the_header_names_five_columns_per_numeric_signal() {
        let sql = Sql::new(
            &crate::core::signals::Signals::defaults(),
            stats::Width::new(std::time::Duration::from_secs(600)).unwrap(),
            &Default::default(),
        );
        let h = header(&sql);
        assert_eq!(h.len(), 4 + 15);
        assert_eq!(
            &h[..5],
            [
                "turbine_id",
                "interval_start",
                "interval_seconds",
                "readings",
                "power_kw_n"
            ]
        );
        assert_eq!(h[8], "power_kw_std");
        assert_eq!(export_sql(&sql).matches("sqrt(greatest(").count(), 3);
    }
}
