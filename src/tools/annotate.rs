//! `galewatch annotate`: the operators' annotations stored, listed, removed and imported from a
//! cleaning file, each output a few lines for a terminal (what an annotation is:
//! `core::annotation`; the SQL: `sink::annotations`).

use crate::core::annotation::Annotation;
use crate::core::span::Span;
use crate::daemon::config::Config;
use crate::tools::review::ReviewError;

/// Checks `list` against the declared signals: the first at fault named (with its line in a
/// file, where `lines` gives them).
pub fn check(cfg: &Config, list: &[Annotation], lines: Option<&[usize]>) -> Result<(), String> {
    let signals = &cfg.rules.limits.signals;
    for (i, a) in list.iter().enumerate() {
        a.check(|s| signals.position(s).is_some()).map_err(|e| {
            match lines.and_then(|l| l.get(i)) {
                Some(line) => format!("line {line}: {e}"),
                None => e,
            }
        })?;
    }
    Ok(())
}

/// Stores `list` (checked first), all or nothing; says how many were new.
pub async fn add(cfg: &Config, list: &[Annotation]) -> Result<String, ReviewError> {
    check(cfg, list, None).map_err(ReviewError::Refused)?;
    let mut c = cfg.db.open().await?;
    let added = crate::sink::annotations::add(&mut c, list).await?;
    let known = list.len() as u64 - added;
    Ok(match (added, known) {
        (1, 0) if list.len() == 1 => "annotation added".into(),
        (0, 1) if list.len() == 1 => "already annotated so: nothing added".into(),
        _ => format!("{added} annotation(s) added, {known} already there"),
    })
}

/// The annotations overlapping `span` of the turbines `turbine` covers, a line each.
pub async fn list(
    cfg: &Config,
    turbine: Option<&str>,
    span: Option<Span>,
) -> Result<String, ReviewError> {
    let c = cfg.db.open().await?;
    let all = crate::sink::annotations::list(&c, span, turbine).await?;
    if all.is_empty() {
        return Ok("no annotation".into());
    }
    let t = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M:%S").to_string();
    let mut out = vec![format!(
        "{:>6}  {:<24} {:<16} {:<19}  {:<19}  {:<22} reason",
        "id", "turbine", "signal", "from (UTC)", "to", "category"
    )];
    for a in &all {
        let who = match &a.target {
            crate::core::annotation::Target::Turbine(t) => crate::core::shown::shown(t).to_string(),
            crate::core::annotation::Target::Prefix(p) => {
                format!("{}*", crate::core::shown::shown(p))
            }
        };
        out.push(format!(
            "{:>6}  {:<24} {:<16} {:<19}  {:<19}  {:<22} {}",
            a.id.unwrap_or_default(),
            who,
            a.signal.as_deref().unwrap_or("(all)"),
            t(a.span.from),
            t(a.span.to),
            a.category.map_or("-", |c| c.name()),
            crate::core::shown::shown(&a.reason)
        ));
    }
    Ok(out.join("\n"))
}

/// Removes annotation `id`.
pub async fn remove(cfg: &Config, id: i64) -> Result<String, ReviewError> {
    let c = cfg.db.open().await?;
    match crate::sink::annotations::remove(&c, id).await? {
        true => Ok(format!("annotation {id} removed")),
        false => Err(ReviewError::Refused(format!(
            "no annotation {id} (galewatch annotate list shows them)"
        ))),
    }
}
