//! What a benchmark row wrote to PostgreSQL's write-ahead log: records, full-page images and
//! bytes a reading, from `pg_stat_wal` (the whole server's counters, so read on a quiet server).
//! Backends report to it in arrears (at most once a second, and when they go idle or exit), so
//! the counters are read once they have stopped moving: read at once after a short run they
//! showed nothing of it.
//! Shared by bench-db and bench-tx (each includes this file with `#[path]`).

/// A plain connection to read the counters on, beside the benchmark's own.
pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
}

/// The server's WAL counters once every backend has reported (unchanged over 1.5 s; at most
/// about 15 s): records, full-page images, bytes. None where the view is missing (before
/// PostgreSQL 14) or unreadable.
pub async fn counters(client: &tokio_postgres::Client) -> Option<[f64; 3]> {
    let mut last = now(client).await?;
    let mut still = 0;
    for _ in 0..30 {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let next = now(client).await?;
        still = if next == last { still + 1 } else { 0 };
        last = next;
        if still == 3 {
            break;
        }
    }
    Some(last)
}

/// The counters as they stand.
async fn now(client: &tokio_postgres::Client) -> Option<[f64; 3]> {
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
