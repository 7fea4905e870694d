//! What a benchmark row wrote to PostgreSQL's write-ahead log: records, full-page images and
//! bytes a reading, from `pg_stat_wal` (the whole server's counters, so read on a quiet server).
//! Shared by bench-db and bench-tx (each includes this file with `#[path]`).

/// The server's WAL counters now: records, full-page images, bytes. None where the view is
/// missing (before PostgreSQL 14) or unreadable.
pub async fn counters(client: &tokio_postgres::Client) -> Option<[f64; 3]> {
    let row = client
        .query_one(
            "SELECT wal_records::float8, wal_fpi::float8, wal_bytes::float8 FROM pg_stat_wal",
            &[],
        )
        .await
        .ok()?;
    Some([row.get(0), row.get(1), row.get(2)])
}

/// `; WAL a reading: R records, F full-page images, B bytes` between two readings of the
/// counters, or nothing when either is missing.
pub fn per_reading(before: Option<[f64; 3]>, after: Option<[f64; 3]>, readings: u64) -> String {
    match (before, after) {
        (Some(b), Some(a)) if readings > 0 => {
            let n = readings as f64;
            format!(
                "; WAL a reading: {:.2} records, {:.3} full-page images, {:.0} bytes",
                (a[0] - b[0]) / n,
                (a[1] - b[1]) / n,
                (a[2] - b[2]) / n
            )
        }
        _ => String::new(),
    }
}
