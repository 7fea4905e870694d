//! Telemetry: the Prometheus endpoint and the names of every metric Galewatch exports.
//!
//! Reading counters move when a batch's transaction commits, never before, and all of a batch's
//! under one lock that a scrape takes too ([`counting`]), so at every scrape
//! `received = inserted + duplicate + quarantined + rejected` holds exactly. `/metrics` is served
//! here (a scrape renders under that lock), not by the exporter's own listener.

use std::net::SocketAddr;

use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::error::Error;

pub(crate) const READINGS_RECEIVED: &str = "galewatch_readings_received_total";
pub(crate) const READINGS_INSERTED: &str = "galewatch_readings_inserted_total";
pub(crate) const READINGS_DUPLICATE: &str = "galewatch_readings_duplicate_total";
pub(crate) const READINGS_QUARANTINED: &str = "galewatch_readings_quarantined_total";
pub(crate) const READINGS_REJECTED: &str = "galewatch_readings_rejected_total";
pub(crate) const READINGS_UNSTORABLE: &str = "galewatch_readings_unstorable_total";
pub(crate) const SPARKPLUG_BIRTHS_UNSTORABLE: &str = "galewatch_sparkplug_births_unstorable_total";
pub(crate) const MESSAGES_RECEIVED: &str = "galewatch_messages_received_total";
pub(crate) const BATCHES_COMMITTED: &str = "galewatch_batches_committed_total";
pub(crate) const DB_ERRORS: &str = "galewatch_db_errors_total";
pub(crate) const BROKER_RECONNECTS: &str = "galewatch_broker_reconnects_total";
pub(crate) const BROKER_CONNECT_FAILURES: &str = "galewatch_broker_connect_failures_total";
pub(crate) const ACKS_SENT: &str = "galewatch_acks_sent_total";
pub(crate) const ACKS_DROPPED_STALE: &str = "galewatch_acks_dropped_stale_total";
pub(crate) const BATCH_SIZE_READINGS: &str = "galewatch_batch_size_readings";
pub(crate) const BATCH_WRITE_SECONDS: &str = "galewatch_batch_write_duration_seconds";
pub(crate) const ARRIVAL_TO_ACK_SECONDS: &str = "galewatch_arrival_to_ack_seconds";
pub(crate) const BROKER_CONNECTED: &str = "galewatch_broker_connected";
pub(crate) const BROKER_URL_POSITION: &str = "galewatch_broker_url_position";
pub(crate) const BROKER_SESSIONS_HELD: &str = "galewatch_broker_sessions_held";
pub(crate) const READY: &str = "galewatch_ready";
pub(crate) const RETAINED_CLEARS: &str = "galewatch_retained_clears_total";
pub(crate) const DB_CONNECTED: &str = "galewatch_db_connected";
pub(crate) const MESSAGES_UNACKED: &str = "galewatch_messages_unacked";
pub(crate) const BATCHES_PARKED: &str = "galewatch_batches_parked";
pub(crate) const BYTES_UNACKED: &str = "galewatch_unacked_bytes";
pub(crate) const OLDEST_UNACKED_SECONDS: &str = "galewatch_oldest_unacked_message_age_seconds";
pub(crate) const INGEST_LAG_SECONDS: &str = "galewatch_ingest_lag_seconds";
const BUILD_INFO: &str = "galewatch_build_info";
pub(crate) const TURBINES_CLOCK_SUSPECT: &str = "galewatch_turbines_clock_suspect";
pub(crate) const QUARANTINE_RESOLUTIONS: &str = "galewatch_quarantine_resolutions";
pub(crate) const PARTITIONS_CREATED: &str = "galewatch_partitions_created_total";
pub(crate) const PARTITIONS_DROPPED: &str = "galewatch_partitions_dropped_total";
pub(crate) const RETENTION_DELETED: &str = "galewatch_retention_deleted_rows_total";
pub(crate) const SPARKPLUG_MESSAGES: &str = "galewatch_sparkplug_messages_total";
pub(crate) const SPARKPLUG_METRICS_IGNORED: &str = "galewatch_sparkplug_metrics_ignored_total";
pub(crate) const SIGNAL_ABSENT: &str = "galewatch_signal_absent_total";
pub(crate) const TURBINES_MISSING_SIGNAL: &str = "galewatch_turbines_missing_signal";
pub(crate) const FLEET_COMPLETENESS: &str = "galewatch_fleet_completeness_ratio";
pub(crate) const TURBINE_COMPLETENESS: &str = "galewatch_turbine_completeness_ratio";
pub(crate) const TURBINES_INCOMPLETE: &str = "galewatch_turbines_incomplete";
pub(crate) const INTERVALS_FLAGGED: &str = "galewatch_intervals_flagged";
pub(crate) const FLEET_AVAILABILITY: &str = "galewatch_fleet_availability_ratio";
pub(crate) const TURBINE_AVAILABILITY: &str = "galewatch_turbine_availability_ratio";
pub(crate) const TURBINES_BELOW_AVAILABILITY: &str = "galewatch_turbines_below_availability";
pub(crate) const SPARKPLUG_SEQ_GAPS: &str = "galewatch_sparkplug_seq_gaps_total";
pub(crate) const SPARKPLUG_REBIRTHS: &str = "galewatch_sparkplug_rebirths_requested_total";
pub(crate) const MAINTENANCE_LAST_SUCCESS: &str =
    "galewatch_maintenance_last_success_timestamp_seconds";

/// Held while a batch's counters move, and while a scrape renders: a scrape sees each batch
/// counted whole or not at all.
static COUNTING: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The lock a batch's counters move under (see [`COUNTING`]); hold it only while they do.
pub fn counting() -> std::sync::RwLockWriteGuard<'static, ()> {
    COUNTING.write().unwrap_or_else(|p| p.into_inner())
}

/// How often the exporter's histograms and summaries are tidied (the exporter's own listener did
/// it on every scrape and on a timer).
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves `GET /metrics` (any path, as the exporter's listener did) on `listener`, rendering
/// under [`COUNTING`].
async fn serve(listener: std::net::TcpListener, handle: PrometheusHandle) {
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(UPKEEP_EVERY);
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    let render = move || {
        let handle = handle.clone();
        async move {
            let text = {
                let _whole = COUNTING.read().unwrap_or_else(|p| p.into_inner());
                handle.render()
            };
            (
                [(
                    axum::http::header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                text,
            )
        }
    };
    let app = axum::Router::new().fallback(axum::routing::get(render));
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "serving /metrics");
            return;
        }
    };
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "serving /metrics stopped");
    }
}

/// Starts the `/metrics` listener and describes every family (HELP text and unit).
pub fn install(listen: SocketAddr) -> Result<(), Error> {
    let listener = std::net::TcpListener::bind(listen)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| {
            Error::other(
                "starting the metrics endpoint",
                format!("{listen} (metrics_listen): {e}"),
            )
        })?;
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(BATCH_SIZE_READINGS.into()),
            &[1.0, 10.0, 100.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0],
        )
        .and_then(|b| {
            // From a turbine's clock to our commit: network, broker queue, resends a minute
            // late, and clock skew all show here, so the buckets reach a day. Fine around
            // `batch_max_wait`'s default (100 ms), where a healthy daemon's p99 falls.
            b.set_buckets_for_metric(
                Matcher::Full(INGEST_LAG_SECONDS.into()),
                &[
                    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.11, 0.12, 0.135, 0.15, 0.2, 0.25, 0.5,
                    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0, 21600.0, 86400.0,
                ],
            )
        })
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Suffix("_seconds".into()),
                &[
                    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                    30.0,
                ],
            )
        })
        .map_err(|e| Error::other("configuring the metrics exporter", e))?
        .install_recorder()
        .map_err(|e| Error::other("starting the metrics endpoint", e))?;
    tokio::spawn(serve(listener, handle));
    describe();
    metrics::gauge!(
        BUILD_INFO,
        "version" => env!("CARGO_PKG_VERSION"),
        "commit" => env!("BUILT_FROM_COMMIT")
    )
    .set(1.0);
    metrics::gauge!(BROKER_CONNECTED).set(0.0);
    metrics::gauge!(BROKER_URL_POSITION).set(0.0);
    metrics::gauge!(BROKER_SESSIONS_HELD).set(0.0);
    metrics::gauge!(READY).set(0.0);
    metrics::counter!(RETAINED_CLEARS).increment(0);
    metrics::gauge!(DB_CONNECTED).set(0.0);
    metrics::gauge!(MESSAGES_UNACKED).set(0.0);
    metrics::gauge!(BATCHES_PARKED).set(0.0);
    metrics::gauge!(BYTES_UNACKED).set(0.0);
    metrics::gauge!(OLDEST_UNACKED_SECONDS).set(0.0);
    metrics::counter!(BROKER_RECONNECTS).increment(0);
    metrics::counter!(BROKER_CONNECT_FAILURES).increment(0);
    metrics::gauge!(TURBINES_CLOCK_SUSPECT).set(0.0);
    metrics::counter!(PARTITIONS_CREATED).increment(0);
    metrics::counter!(PARTITIONS_DROPPED).increment(0);
    for table in ["readings", "quarantine", "rejected", "interval_stats"] {
        metrics::counter!(RETENTION_DELETED, "table" => table).increment(0);
    }
    metrics::counter!(SPARKPLUG_METRICS_IGNORED).increment(0);
    metrics::counter!(SPARKPLUG_SEQ_GAPS).increment(0);
    metrics::counter!(READINGS_UNSTORABLE).increment(0);
    metrics::counter!(SPARKPLUG_BIRTHS_UNSTORABLE).increment(0);
    for cause in ["unknown_alias", "unproven_birth", "seq_gap"] {
        metrics::counter!(SPARKPLUG_REBIRTHS, "cause" => cause).increment(0);
    }
    Ok(())
}

/// A metric family's kind, which says how it is described.
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every family's kind, name, unit and HELP text, in the order [`describe`] gives them.
const FAMILIES: &[(Kind, &str, Option<Unit>, &str)] = &[
    (Kind::Counter, SPARKPLUG_MESSAGES, None, "Sparkplug B messages decoded, by type (NBIRTH, NDATA, DDATA, …), counted on arrival (a redelivery counts again)."),
    (Kind::Counter, SIGNAL_ABSENT, None, "Readings that lacked a declared signal (absent or null), by signal, counted when their batch commits. One that grows with every reading points at a misnamed signal (its pointer, or its Sparkplug B metric)."),
    (Kind::Gauge, TURBINES_MISSING_SIGNAL, None, "Turbines whose stored readings of the last hour all lacked a declared signal, by signal, read from the interval statistics' counts every 10 minutes (0 while statistics are off)."),
    (Kind::Gauge, FLEET_COMPLETENESS, None, "The fleet's readings over those its declared sample periods expect, over the last hour of whole statistics intervals (absent until a sample_period is declared and an hour is stored); read every 10 minutes."),
    (Kind::Gauge, TURBINE_COMPLETENESS, None, "A turbine's readings over those expected, over the last hour of whole intervals: the least complete turbines below 1, at most 500, keep a series (0 once they send nothing)."),
    (Kind::Gauge, TURBINES_INCOMPLETE, None, "Turbines whose last hour of whole intervals held under 90 % of the readings expected."),
    (Kind::Gauge, INTERVALS_FLAGGED, None, "Intervals of the last hour flagged, by signal and flag: stuck (a frozen sensor), implausible (a value outside the soft bounds), absent (some reading lacked the signal)."),
    (Kind::Gauge, FLEET_AVAILABILITY, None, "The fleet's time-based availability (IEC 61400-26-1) over the last day of whole statistics intervals: available time over available and unavailable time (availability_available, availability_unavailable); absent while availability is not kept."),
    (Kind::Gauge, TURBINE_AVAILABILITY, None, "A turbine's time-based availability over the last day of whole intervals: the least available turbines below 1, at most 500, keep a series."),
    (Kind::Gauge, TURBINES_BELOW_AVAILABILITY, None, "Turbines whose time-based availability over the last day is under 95 %."),
    (Kind::Counter, SPARKPLUG_METRICS_IGNORED, None, "Sparkplug B metrics that feed no signal (not mapped by sparkplug_metrics, or on a level that names no turbine), counted on arrival."),
    (Kind::Counter, SPARKPLUG_SEQ_GAPS, None, "Sparkplug B messages whose sequence number was not the one expected from their edge node (each asks for a rebirth); never dropped."),
    (Kind::Counter, SPARKPLUG_REBIRTHS, None, "Rebirth requests (NCMD Node Control/Rebirth) sent, by cause: unknown_alias, unproven_birth or seq_gap (at most one per node per sparkplug_rebirth_interval and sparkplug_rebirths_per_second across the fleet)."),
    (Kind::Counter, READINGS_UNSTORABLE, None, "Readings or rejections the database refused to store in any table, even as a rejected row (e.g. text the database's encoding cannot hold): acknowledged, logged, counted here. received = inserted + duplicate + quarantined + rejected + unstorable."),
    (Kind::Counter, SPARKPLUG_BIRTHS_UNSTORABLE, None, "Sparkplug B births the database refused to store (withdrawn instead, and a message carrying no reading rejected invalid_value); logged."),
    (Kind::Gauge, QUARANTINE_RESOLUTIONS, None, "Quarantine entries resolved (galewatch quarantine resolve), by the entry's reason, the choice, and the effect on readings: added (a row readings did not have), replaced, or none; read from the tables every 5 s. Rows in readings = inserted + effect=\"added\" (until retention removes any)."),
    (Kind::Counter, PARTITIONS_CREATED, None, "readings partitions created by this daemon (ahead of time, or on demand for a backlog)."),
    (Kind::Counter, PARTITIONS_DROPPED, None, "readings partitions dropped by retention (readings_retention)."),
    (Kind::Counter, RETENTION_DELETED, None, "Rows removed by retention, by table (readings: dropped partitions and old rows of the default partition)."),
    (Kind::Gauge, MAINTENANCE_LAST_SUCCESS, Some(Unit::Seconds), "Unix time of this daemon's last completed maintenance pass (partitions ahead, retention); absent until one completes."),
    (Kind::Gauge, TURBINES_CLOCK_SUSPECT, None, "Turbines whose clock is suspect (offset or drift past its threshold, or too many collisions in the last day); which ones: galewatch turbines --suspect."),
    (Kind::Counter, READINGS_RECEIVED, None, "Readings whose outcome committed: each decoded reading once, and each message that could not be split into readings once."),
    (Kind::Counter, READINGS_INSERTED, None, "Readings stored in the readings table (key not seen before)."),
    (Kind::Counter, READINGS_DUPLICATE, None, "Readings dropped as exact duplicates (same key, same values), including resends of quarantined or rejected input."),
    (Kind::Counter, READINGS_QUARANTINED, None, "Readings put in the quarantine table, by reason (collision, future_timestamp)."),
    (Kind::Counter, READINGS_REJECTED, None, "Readings or messages put in the rejected table, by reason."),
    (Kind::Counter, MESSAGES_RECEIVED, None, "MQTT messages whose outcome committed."),
    (Kind::Counter, BATCHES_COMMITTED, None, "Batch transactions committed."),
    (Kind::Counter, DB_ERRORS, None, "Database errors, by SQLSTATE class (class=\"none\" for a lost connection or a timeout)."),
    (Kind::Counter, BROKER_RECONNECTS, None, "Broker connections lost (a connection that was up; each followed by a reconnect)."),
    (Kind::Counter, BROKER_CONNECT_FAILURES, None, "Attempts to connect to a broker of mqtt_url that failed (refused, unreachable, timed out, TLS or credentials refused); a whole round of them backs off."),
    (Kind::Counter, ACKS_SENT, None, "PUBACKs queued for the broker after commit."),
    (Kind::Counter, ACKS_DROPPED_STALE, None, "Acks not sent because their message came on an earlier connection (the broker redelivers it)."),
    (Kind::Histogram, BATCH_SIZE_READINGS, None, "Items (readings and rejections) per committed batch."),
    (Kind::Histogram, BATCH_WRITE_SECONDS, Some(Unit::Seconds), "Time from COPY start to COMMIT of a batch, retries included."),
    (Kind::Histogram, ARRIVAL_TO_ACK_SECONDS, Some(Unit::Seconds), "Time from a message's arrival to its ack being queued."),
    (Kind::Gauge, BROKER_CONNECTED, None, "1 while connected to the broker, else 0."),
    (Kind::Gauge, BROKER_SESSIONS_HELD, None, "Brokers of mqtt_url known to hold this daemon's persistent session with its subscription (the one in use, and with mqtt_url_kind = independent each standby visited within the last two minutes): below the list's length, a standby would drop what publishers send it for this daemon."),
    (Kind::Gauge, BROKER_URL_POSITION, None, "Which URL of mqtt_url the last connection was made to, from 1 (0 before the first): above 1, the daemon failed over to a later broker of the list."),
    (Kind::Gauge, DB_CONNECTED, None, "1 while any writer holds a database connection, else 0."),
    (Kind::Gauge, MESSAGES_UNACKED, None, "Messages received and not yet acknowledged."),
    (Kind::Gauge, BATCHES_PARKED, None, "Batches committed whose acks wait for an earlier batch still being written (database_writers > 1): acks leave in arrival order."),
    (Kind::Counter, RETAINED_CLEARS, None, "Empty retained messages (a publisher clearing its topic's retained reading): acknowledged, no reading."),
    (Kind::Gauge, READY, None, "1 while the daemon takes messages: migrations applied, connected to the broker and subscribed (SUBACK granted; the daemon subscribes on every connection)."),
    (Kind::Gauge, BYTES_UNACKED, Some(Unit::Bytes), "Payload bytes of the messages received and not yet acknowledged (bounded by max_unacked_bytes)."),
    (Kind::Gauge, OLDEST_UNACKED_SECONDS, Some(Unit::Seconds), "Age of the oldest message received and not yet acknowledged (0 when none)."),
    (Kind::Histogram, INGEST_LAG_SECONDS, Some(Unit::Seconds), "Commit time minus recorded_at, per inserted reading: delivery delay plus the turbine's clock offset (negative for a clock ahead)."),
    (Kind::Gauge, BUILD_INFO, None, "Always 1; the version and commit labels say which build runs."),
];

/// Gives the recorder each family's HELP text and unit ([`FAMILIES`]).
fn describe() {
    for &(kind, name, unit, help) in FAMILIES {
        match (kind, unit) {
            (Kind::Counter, None) => describe_counter!(name, help),
            (Kind::Counter, Some(unit)) => describe_counter!(name, unit, help),
            (Kind::Gauge, None) => describe_gauge!(name, help),
            (Kind::Gauge, Some(unit)) => describe_gauge!(name, unit, help),
            (Kind::Histogram, None) => describe_histogram!(name, help),
            (Kind::Histogram, Some(unit)) => describe_histogram!(name, unit, help),
        }
    }
}
