//! Telemetry: the Prometheus endpoint and the names of every metric Galewatch exports.
//!
//! Reading counters move when a batch's transaction commits, never before, so at every scrape
//! `received = inserted + duplicate + quarantined + rejected` holds exactly.

use std::net::SocketAddr;

use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

use crate::error::Error;

pub const READINGS_RECEIVED: &str = "galewatch_readings_received_total";
pub const READINGS_INSERTED: &str = "galewatch_readings_inserted_total";
pub const READINGS_DUPLICATE: &str = "galewatch_readings_duplicate_total";
pub const READINGS_QUARANTINED: &str = "galewatch_readings_quarantined_total";
pub const READINGS_REJECTED: &str = "galewatch_readings_rejected_total";
pub const READINGS_UNSTORABLE: &str = "galewatch_readings_unstorable_total";
pub const SPARKPLUG_BIRTHS_UNSTORABLE: &str = "galewatch_sparkplug_births_unstorable_total";
pub const MESSAGES_RECEIVED: &str = "galewatch_messages_received_total";
pub const BATCHES_COMMITTED: &str = "galewatch_batches_committed_total";
pub const DB_ERRORS: &str = "galewatch_db_errors_total";
pub const BROKER_RECONNECTS: &str = "galewatch_broker_reconnects_total";
pub const ACKS_SENT: &str = "galewatch_acks_sent_total";
pub const ACKS_DROPPED_STALE: &str = "galewatch_acks_dropped_stale_total";
pub const BATCH_SIZE_READINGS: &str = "galewatch_batch_size_readings";
pub const BATCH_WRITE_SECONDS: &str = "galewatch_batch_write_duration_seconds";
pub const ARRIVAL_TO_ACK_SECONDS: &str = "galewatch_arrival_to_ack_seconds";
pub const BROKER_CONNECTED: &str = "galewatch_broker_connected";
pub const READY: &str = "galewatch_ready";
pub const RETAINED_CLEARS: &str = "galewatch_retained_clears_total";
pub const DB_CONNECTED: &str = "galewatch_db_connected";
pub const MESSAGES_UNACKED: &str = "galewatch_messages_unacked";
pub const BATCHES_PARKED: &str = "galewatch_batches_parked";
pub const BYTES_UNACKED: &str = "galewatch_unacked_bytes";
pub const OLDEST_UNACKED_SECONDS: &str = "galewatch_oldest_unacked_message_age_seconds";
pub const INGEST_LAG_SECONDS: &str = "galewatch_ingest_lag_seconds";
pub const BUILD_INFO: &str = "galewatch_build_info";
pub const TURBINES_CLOCK_SUSPECT: &str = "galewatch_turbines_clock_suspect";
pub const QUARANTINE_RESOLUTIONS: &str = "galewatch_quarantine_resolutions";
pub const PARTITIONS_CREATED: &str = "galewatch_partitions_created_total";
pub const PARTITIONS_DROPPED: &str = "galewatch_partitions_dropped_total";
pub const RETENTION_DELETED: &str = "galewatch_retention_deleted_rows_total";
pub const SPARKPLUG_MESSAGES: &str = "galewatch_sparkplug_messages_total";
pub const SPARKPLUG_METRICS_IGNORED: &str = "galewatch_sparkplug_metrics_ignored_total";
pub const SPARKPLUG_SEQ_GAPS: &str = "galewatch_sparkplug_seq_gaps_total";
pub const SPARKPLUG_REBIRTHS: &str = "galewatch_sparkplug_rebirths_requested_total";
pub const MAINTENANCE_LAST_SUCCESS: &str = "galewatch_maintenance_last_success_timestamp_seconds";

/// Starts the `/metrics` listener and describes every family (HELP text and unit).
pub fn install(listen: SocketAddr) -> Result<(), Error> {
    PrometheusBuilder::new()
        .with_http_listener(listen)
        .set_buckets_for_metric(
            Matcher::Full(BATCH_SIZE_READINGS.into()),
            &[1.0, 10.0, 100.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0],
        )
        .and_then(|b| {
            // From a turbine's clock to our commit: network, broker queue, resends a minute
            // late, and clock skew all show here, so the buckets reach a day.
            b.set_buckets_for_metric(
                Matcher::Full(INGEST_LAG_SECONDS.into()),
                &[
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                    60.0, 120.0, 300.0, 900.0, 3600.0, 21600.0, 86400.0,
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
        .install()
        .map_err(|e| Error::other("starting the metrics endpoint", e))?;
    describe();
    metrics::gauge!(
        BUILD_INFO,
        "version" => env!("CARGO_PKG_VERSION"),
        "commit" => env!("BUILT_FROM_COMMIT")
    )
    .set(1.0);
    metrics::gauge!(BROKER_CONNECTED).set(0.0);
    metrics::gauge!(READY).set(0.0);
    metrics::counter!(RETAINED_CLEARS).increment(0);
    metrics::gauge!(DB_CONNECTED).set(0.0);
    metrics::gauge!(MESSAGES_UNACKED).set(0.0);
    metrics::gauge!(BATCHES_PARKED).set(0.0);
    metrics::gauge!(BYTES_UNACKED).set(0.0);
    metrics::gauge!(OLDEST_UNACKED_SECONDS).set(0.0);
    metrics::counter!(BROKER_RECONNECTS).increment(0);
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

fn describe() {
    describe_counter!(
        SPARKPLUG_MESSAGES,
        "Sparkplug B messages decoded, by type (NBIRTH, NDATA, DDATA, …), counted on arrival (a redelivery counts again)."
    );
    describe_counter!(
        SPARKPLUG_METRICS_IGNORED,
        "Sparkplug B metrics that feed no signal (not mapped by sparkplug_metrics, or on a level that names no turbine), counted on arrival."
    );
    describe_counter!(
        SPARKPLUG_SEQ_GAPS,
        "Sparkplug B messages whose sequence number was not the one expected from their edge node (each asks for a rebirth); never dropped."
    );
    describe_counter!(
        SPARKPLUG_REBIRTHS,
        "Rebirth requests (NCMD Node Control/Rebirth) sent, by cause: unknown_alias, unproven_birth or seq_gap (at most one per node per sparkplug_rebirth_interval and sparkplug_rebirths_per_second across the fleet)."
    );
    describe_counter!(
        READINGS_UNSTORABLE,
        "Readings or rejections the database refused to store in any table, even as a rejected row (e.g. text the database's encoding cannot hold): acknowledged, logged, counted here. received = inserted + duplicate + quarantined + rejected + unstorable."
    );
    describe_counter!(
        SPARKPLUG_BIRTHS_UNSTORABLE,
        "Sparkplug B births the database refused to store (withdrawn instead, and a message carrying no reading rejected invalid_value); logged."
    );
    describe_gauge!(
        QUARANTINE_RESOLUTIONS,
        "Quarantine entries resolved (galewatch quarantine resolve), by the entry's reason, the choice, and the effect on readings: added (a row readings did not have), replaced, or none; read from the tables every 5 s. Rows in readings = inserted + effect=\"added\" (until retention removes any)."
    );
    describe_counter!(
        PARTITIONS_CREATED,
        "readings partitions created by this daemon (ahead of time, or on demand for a backlog)."
    );
    describe_counter!(
        PARTITIONS_DROPPED,
        "readings partitions dropped by retention (readings_retention)."
    );
    describe_counter!(
        RETENTION_DELETED,
        "Rows removed by retention, by table (readings: dropped partitions and old rows of the default partition)."
    );
    describe_gauge!(
        MAINTENANCE_LAST_SUCCESS,
        Unit::Seconds,
        "Unix time of this daemon's last completed maintenance pass (partitions ahead, retention); absent until one completes."
    );
    describe_gauge!(
        TURBINES_CLOCK_SUSPECT,
        "Turbines whose clock is suspect (offset or drift past its threshold, or too many collisions in the last day); which ones: galewatch turbines --suspect."
    );
    describe_counter!(READINGS_RECEIVED, "Readings whose outcome committed: each decoded reading once, and each message that could not be split into readings once.");
    describe_counter!(
        READINGS_INSERTED,
        "Readings stored in the readings table (key not seen before)."
    );
    describe_counter!(READINGS_DUPLICATE, "Readings dropped as exact duplicates (same key, same values), including resends of quarantined or rejected input.");
    describe_counter!(
        READINGS_QUARANTINED,
        "Readings put in the quarantine table, by reason (collision, future_timestamp)."
    );
    describe_counter!(
        READINGS_REJECTED,
        "Readings or messages put in the rejected table, by reason."
    );
    describe_counter!(MESSAGES_RECEIVED, "MQTT messages whose outcome committed.");
    describe_counter!(BATCHES_COMMITTED, "Batch transactions committed.");
    describe_counter!(
        DB_ERRORS,
        "Database errors, by SQLSTATE class (class=\"none\" for a lost connection or a timeout)."
    );
    describe_counter!(
        BROKER_RECONNECTS,
        "Broker connections lost (each followed by a reconnect with backoff)."
    );
    describe_counter!(ACKS_SENT, "PUBACKs queued for the broker after commit.");
    describe_counter!(ACKS_DROPPED_STALE, "Acks not sent because their message came on an earlier connection (the broker redelivers it).");
    describe_histogram!(
        BATCH_SIZE_READINGS,
        "Items (readings and rejections) per committed batch."
    );
    describe_histogram!(
        BATCH_WRITE_SECONDS,
        Unit::Seconds,
        "Time from COPY start to COMMIT of a batch, retries included."
    );
    describe_histogram!(
        ARRIVAL_TO_ACK_SECONDS,
        Unit::Seconds,
        "Time from a message's arrival to its ack being queued."
    );
    describe_gauge!(BROKER_CONNECTED, "1 while connected to the broker, else 0.");
    describe_gauge!(
        DB_CONNECTED,
        "1 while any writer holds a database connection, else 0."
    );
    describe_gauge!(
        MESSAGES_UNACKED,
        "Messages received and not yet acknowledged."
    );
    describe_gauge!(
        BATCHES_PARKED,
        "Batches committed whose acks wait for an earlier batch still being written (database_writers > 1): acks leave in arrival order."
    );
    describe_counter!(
        RETAINED_CLEARS,
        "Empty retained messages (a publisher clearing its topic's retained reading): acknowledged, no reading."
    );
    describe_gauge!(
        READY,
        "1 while the daemon takes messages: migrations applied, connected to the broker and subscribed (SUBACK granted; the daemon subscribes on every connection)."
    );
    describe_gauge!(
        BYTES_UNACKED,
        Unit::Bytes,
        "Payload bytes of the messages received and not yet acknowledged (bounded by max_unacked_bytes)."
    );
    describe_gauge!(
        OLDEST_UNACKED_SECONDS,
        Unit::Seconds,
        "Age of the oldest message received and not yet acknowledged (0 when none)."
    );
    describe_histogram!(
        INGEST_LAG_SECONDS,
        Unit::Seconds,
        "Commit time minus recorded_at, per inserted reading: delivery delay plus the turbine's clock offset (negative for a clock ahead)."
    );
    describe_gauge!(
        BUILD_INFO,
        "Always 1; the version and commit labels say which build runs."
    );
}
