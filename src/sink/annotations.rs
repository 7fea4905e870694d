//! Annotations in the database: stored (a period once, whatever the imports), listed, removed,
//! read for a range; the SQL test that an interval row is covered by one (the power curve
//! leaves those out); and the intervals those with a category cover, whose time availability
//! moves into it. What an annotation is: `core::annotation`; the moving, `core::allocation`.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use crate::core::annotation::{self, Annotation, Target};
use crate::core::span::Span;
use crate::error::{DbContext, Error};

/// Stores `list` in one transaction (all or nothing); a period already stored (the same
/// turbine, signal, times, category and reason) is not stored twice. Returns those added.
pub async fn add(c: &mut tokio_postgres::Client, list: &[Annotation]) -> Result<u64, Error> {
    let tx = c.transaction().await.db("storing annotations")?;
    let mut added = 0;
    for a in list {
        added += tx
            .execute(
                "INSERT INTO annotations
                        (turbine_id, is_prefix, signal, starts_at, ends_at, category, reason)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT DO NOTHING",
                &[
                    &a.target.text(),
                    &a.target.is_prefix(),
                    &a.signal.as_deref().unwrap_or(""),
                    &a.span.from,
                    &a.span.to,
                    &a.category.map_or("", |c| c.name()),
                    &a.reason,
                ],
            )
            .await
            .db("storing an annotation")?;
    }
    tx.commit().await.db("storing annotations")?;
    Ok(added)
}

/// The most annotations one read returns (a range's, for an export or a page).
pub const MAX_READ: i64 = 100_000;

/// The annotations overlapping `span` (all when None), of turbines `turbine` covers (all when
/// None), oldest first; at most [`MAX_READ`].
pub async fn list<C: GenericClient>(
    c: &C,
    span: Option<Span>,
    turbine: Option<&str>,
) -> Result<Vec<Annotation>, Error> {
    let (from, to): (Option<DateTime<Utc>>, Option<DateTime<Utc>>) =
        (span.map(|s| s.from), span.map(|s| s.to));
    let rows = c
        .query(
            &format!(
                "SELECT {COLUMNS}
               FROM annotations
              WHERE ($1::timestamptz IS NULL OR ends_at > $1)
                AND ($2::timestamptz IS NULL OR starts_at < $2)
                AND ($3::text IS NULL OR turbine_id = $3
                     OR (is_prefix AND starts_with($3, turbine_id)))
              ORDER BY starts_at, id
              LIMIT $4"
            ),
            &[&from, &to, &turbine, &MAX_READ],
        )
        .await
        .db("reading annotations")?;
    Ok(rows.iter().map(annotation).collect())
}

/// The columns `id, turbine_id, is_prefix, signal, starts_at, ends_at, category, reason` of a row.
const COLUMNS: &str = "id, turbine_id, is_prefix, signal, starts_at, ends_at, category, reason";

/// An annotation of a row of [`COLUMNS`].
fn annotation(r: &tokio_postgres::Row) -> Annotation {
    let id: String = r.get(1);
    let signal: String = r.get(3);
    let category: String = r.get(6);
    Annotation {
        id: Some(r.get(0)),
        target: if r.get(2) {
            Target::Prefix(id)
        } else {
            Target::Turbine(id)
        },
        signal: Some(signal).filter(|s| !s.is_empty()),
        span: Span::new(r.get(4), r.get(5)),
        category: annotation::category(&category),
        reason: r.get(7),
    }
}

/// The annotations overlapping `span` that move a turbine's time into a category (a whole
/// turbine's, with a category: `core::allocation::notes_of`), oldest first; at most
/// [`MAX_READ`].
pub(crate) async fn categorised<C: GenericClient>(
    c: &C,
    span: Span,
) -> Result<Vec<Annotation>, Error> {
    let rows = c
        .query(
            &format!(
                "SELECT {COLUMNS} FROM annotations
                  WHERE ends_at > $1 AND starts_at < $2 AND signal = '' AND category <> ''
                  ORDER BY starts_at, id
                  LIMIT $3"
            ),
            &[&span.from, &span.to, &MAX_READ],
        )
        .await
        .db("reading the annotations with a category")?;
    Ok(rows.iter().map(annotation).collect())
}

/// Something that changes whenever an annotation with a category is added or removed (their
/// number and the sum of their ids: a removed one's id is never given again), for those who
/// keep what such annotations move.
pub(crate) async fn categorised_version<C: GenericClient>(c: &C) -> Result<(i64, i64), Error> {
    let r = c
        .query_one(
            "SELECT count(*), coalesce(sum(id), 0)::int8 FROM annotations
              WHERE signal = '' AND category <> ''",
            &[],
        )
        .await
        .db("reading the annotations' version")?;
    Ok((r.get(0), r.get(1)))
}

/// The intervals (of `width` seconds, starting in `window`) of each of `turbines` that an
/// annotation of it with a category covers, whole turbine, in turbine and time order: their
/// readings in each availability category (none where not counted) and all their readings.
pub(crate) async fn covered_intervals<C: GenericClient>(
    c: &C,
    width: i32,
    window: Span,
    turbines: &[&str],
) -> Result<Vec<(String, crate::core::allocation::Interval)>, Error> {
    use crate::core::availability::{Category, Counts};
    let cats: Vec<String> = Category::ALL
        .iter()
        .map(|k| {
            format!(
                "coalesce(\"{}\", 0)::int8",
                crate::sink::stats::category_column(*k)
            )
        })
        .collect();
    let statement = format!(
        "SELECT turbine_id, interval_start, readings, {}
           FROM interval_stats
          WHERE interval_seconds = {width} AND interval_start >= $1 AND interval_start < $2
            AND turbine_id = ANY($3)
            AND EXISTS (SELECT 1 FROM annotations a
                         WHERE (a.turbine_id = interval_stats.turbine_id
                                OR (a.is_prefix AND starts_with(interval_stats.turbine_id, a.turbine_id)))
                           AND a.signal = '' AND a.category <> ''
                           AND a.starts_at < interval_stats.interval_start + interval '{width} seconds'
                           AND a.ends_at > interval_stats.interval_start)
          ORDER BY turbine_id, interval_start",
        cats.join(", ")
    );
    let rows = c
        .query(&statement, &[&window.from, &window.to, &turbines])
        .await
        .db("reading the intervals annotations cover")?;
    Ok(rows
        .iter()
        .map(|r| {
            let mut counts = Counts::default();
            for (k, n) in counts.0.iter_mut().enumerate() {
                *n = r.get(3 + k);
            }
            let interval = crate::core::allocation::Interval {
                start: r.get(1),
                counts,
                readings: r.get(2),
            };
            (r.get(0), interval)
        })
        .collect())
}

/// Removes annotation `id`; whether there was one.
pub async fn remove<C: GenericClient>(c: &C, id: i64) -> Result<bool, Error> {
    Ok(c.execute("DELETE FROM annotations WHERE id = $1", &[&id])
        .await
        .db("removing an annotation")?
        > 0)
}

/// The SQL test that an `interval_stats` row (of `width` seconds) is covered by an annotation
/// of its turbine, whole or naming one of `signals`.
pub(crate) fn covered_sql(width: i32, signals: &[&str]) -> String {
    let names: Vec<String> = signals
        .iter()
        .map(|s| format!("'{}'", s.replace('\'', "''")))
        .collect();
    format!(
        "EXISTS (SELECT 1 FROM annotations a
                  WHERE (a.turbine_id = interval_stats.turbine_id
                         OR (a.is_prefix AND starts_with(interval_stats.turbine_id, a.turbine_id)))
                    AND a.signal IN ('', {})
                    AND a.starts_at < interval_stats.interval_start + interval '{width} seconds'
                    AND a.ends_at > interval_stats.interval_start)",
        names.join(", ")
    )
}
