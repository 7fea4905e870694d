//! Daemon: wire the stages together (subscribe → decode → batch → write → ack) and shut them
//! down in order.

pub mod config;
pub mod in_force;
pub mod listeners;
pub mod reference;
mod seams;
mod stages;

use std::sync::Arc;
use std::time::Duration;

use rumqttc::v5::AsyncClient;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{timeout_at, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::backoff::Backoff;
use crate::daemon::config::Config;
use crate::error::Error;
use crate::intake::batch::{self, Acks, Batcher};
use crate::intake::leave;
use crate::intake::ledger::Ledger;
use crate::intake::standby;
use crate::intake::subscribe::Subscriber;
use crate::probe::Probe;
use crate::sink::maintain::Maintainer;
use crate::sink::migrate;
use crate::sink::write;

/// Runs the daemon until `shutdown` is cancelled, then commits and acknowledges what is in hand
/// within the configured grace period. Embeddable: the caller installs the metrics recorder (or
/// none) and reads readiness and the committed counters through `probe`.
///
/// The shutdown, in order, all of it here:
/// 1. `shutdown` is cancelled: the subscriber stops handing messages on (and keeps polling, so
///    acks still go out; it never races its poll against anything: see `subscribe.rs`), the
///    batcher flushes what it holds and ends, maintenance stops between passes.
/// 2. The writers commit and acknowledge the last batches within `shutdown_grace`; past it,
///    `hard_stop` makes them give up (those messages stay unacknowledged: the broker redelivers).
/// 3. The DISCONNECT is queued behind the last acks; the subscriber sends it and reads until the
///    broker closes the connection (at most 2 s more).
/// 4. The background tasks (gauges, clock health) are cancelled and awaited.
pub async fn run(cfg: Config, shutdown: CancellationToken, probe: Probe) -> Result<(), Error> {
    run_as(cfg, shutdown, probe, None).await
}

/// `galewatch leave`: retires this member of its share group for good (see `leave.rs`), on every
/// broker of `mqtt_url` in turn (independent brokers each keep a session of their own; on a
/// cluster's nodes, the first ends the one they share and the rest find none). A broker not
/// reached within `leave::REACH` is reported, not waited for. Interrupted (`shutdown`), it keeps
/// the session and says so.
pub async fn leave(cfg: Config, shutdown: CancellationToken) -> Result<leave::Report, Error> {
    let mut report = leave::Report::default();
    // An attempt in progress is not cut short: give it its whole connect timeout.
    let reach = leave::REACH.max(cfg.brokers.connect_timeout + Duration::from_secs(1));
    for broker in cfg.brokers.list.clone() {
        let mut one = cfg.clone();
        one.brokers.list = vec![broker.clone()];
        let o = leave_one(one, &shutdown, reach).await?;
        report.messages += o.messages;
        report.readings += o.readings;
        report.had_session |= o.had_session;
        let why = match (o.reached, o.end_error) {
            (false, _) => format!("not reached within {}s", reach.as_secs()),
            (true, Some(e)) => format!("could not end the session: {e}"),
            (true, None) => {
                if o.had_session {
                    report.ended.push(broker);
                }
                continue;
            }
        };
        tracing::warn!(broker = %broker, "{why}: a session of this member there, if any, is left as it was");
        report.left_behind.push((broker, why));
    }
    Ok(report)
}

/// What leaving on one broker did.
struct LeftOne {
    messages: u64,
    readings: u64,
    reached: bool,
    had_session: bool,
    /// Reached, but the session could not be ended.
    end_error: Option<Error>,
}

/// Leave on the one broker of `cfg`: lands what its session holds, then ends the session.
async fn leave_one(
    cfg: Config,
    shutdown: &CancellationToken,
    reach: Duration,
) -> Result<LeftOne, Error> {
    let probe = Probe::default();
    let leaving = Arc::new(leave::Leaving::default());
    let drained = shutdown.child_token();
    let watcher = {
        let (probe, leaving, drained) = (probe.clone(), leaving.clone(), drained.clone());
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let mut every = tokio::time::interval(Duration::from_millis(200));
            loop {
                every.tick().await;
                let unreached = !leaving.was_connected() && started.elapsed() >= reach;
                if unreached || leaving.drained(probe.unacked(), std::time::Instant::now()) {
                    drained.cancel();
                    return;
                }
            }
        })
    };
    let ran = run_as(cfg.clone(), drained, probe.clone(), Some(leaving.clone())).await;
    watcher.abort();
    ran?;
    if shutdown.is_cancelled() {
        return Err(Error::other(
            "leaving the share group",
            "interrupted: the session is kept (run galewatch leave again)",
        ));
    }
    let t = probe.totals().committed;
    let reached = leaving.was_connected();
    let end_error = if reached {
        let g = cfg.mqtt();
        leave::end_session(&g, &g.brokers.list[0]).await.err()
    } else {
        None
    };
    Ok(LeftOne {
        messages: t.messages,
        readings: t.received,
        reached,
        had_session: reached && !leaving.had_no_session(),
        end_error,
    })
}

async fn run_as(
    cfg: Config,
    shutdown: CancellationToken,
    probe: Probe,
    leaving: Option<Arc<leave::Leaving>>,
) -> Result<(), Error> {
    if !migrate_when_reachable(&cfg, &shutdown).await? {
        return Ok(());
    }
    let s = &cfg.settings;
    let mut running = start(&cfg, &shutdown, &probe, leaving);
    tracing::info!(
        brokers = %cfg.brokers.list.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        client_id = %s.broker.mqtt_client_id,
        subscription = %s.subscription(),
        "galewatch running"
    );
    let writer_done = watch(&mut running, &shutdown).await?;
    stop(running, s.write.shutdown_grace, writer_done).await;
    tracing::info!("stopped");
    Ok(())
}

/// The stages while they run, and what their shutdown needs.
struct Running {
    subscriber: JoinHandle<Result<(), Error>>,
    batcher: JoinHandle<()>,
    writer: JoinHandle<()>,
    client: AsyncClient,
    /// Sparkplug B's STATE saying the host is offline, published just before DISCONNECT.
    offline: Option<(String, Vec<u8>)>,
    /// The shutdown grace ran out: the writers stop with what they hold unacknowledged.
    hard_stop: CancellationToken,
    /// Tasks with no work to finish: cancelled and awaited at the end.
    background: CancellationToken,
    tracker: TaskTracker,
}

/// Wires the stages, each made from its own group of settings, and starts them: the subscriber
/// (with its formats), the batcher, the writers (which hand custody back to the ledger), the
/// gauges and the upkeep.
fn start(
    cfg: &Config,
    shutdown: &CancellationToken,
    probe: &Probe,
    leaving: Option<Arc<leave::Leaving>>,
) -> Running {
    let intake = cfg.intake();
    let write = cfg.write();
    // Custody of every message from PUBLISH to PUBACK (see `ledger.rs`).
    let ledger = Ledger::new(intake.max_unacked_readings, intake.max_unacked_bytes);
    probe.attach({
        let ledger = ledger.clone();
        Arc::new(move || ledger.held())
    });
    let (msg_tx, msg_rx) = mpsc::unbounded_channel();
    // One batch waits while the writers land the ones before it.
    let (batch_tx, batch_rx) = mpsc::channel(1);
    let hard_stop = CancellationToken::new();
    let background = CancellationToken::new();
    let tracker = TaskTracker::new();
    let mqtt = cfg.mqtt();
    let formats = stages::formats(cfg, &mqtt);
    let (mut subscriber, client) =
        Subscriber::new(&mqtt, ledger.clone(), probe.clone(), msg_tx, formats);
    match leaving {
        Some(leaving) => subscriber = subscriber.leaving(leaving),
        None => subscriber = with_standbys(subscriber, &mqtt, &tracker, &background),
    }
    let offline = subscriber.offline_state();
    let subscriber = tokio::spawn(subscriber.run(shutdown.clone()));
    let batcher = tokio::spawn(batch::run(
        msg_rx,
        batch_tx,
        Batcher::new(
            intake.batch_max_readings,
            intake.batch_max_bytes,
            intake.batch_max_wait,
        )
        .tracking_keys(write.writers > 1),
        shutdown.clone(),
    ));
    let acks = Acks {
        ledger: ledger.clone(),
        client: client.clone(),
    };
    let writer = tokio::spawn(write::run_all(
        write,
        batch_rx,
        acks,
        probe.clone(),
        hard_stop.clone(),
    ));
    tracker.spawn(background.clone().run_until_cancelled_owned(
        crate::sink::health::refresh_table_gauges(cfg.db.clone(), cfg.clock()),
    ));
    if cfg.settings.stats.stats_enabled {
        // Which signals the turbines' readings lack, and the fleet's completeness and flags,
        // from the statistics (at start, then every 10 minutes); without statistics the
        // writers' own fleet-wide watch names the missing signals.
        tracker.spawn(
            background
                .clone()
                .run_until_cancelled_owned(crate::sink::quality::watch(
                    cfg.db.clone(),
                    cfg.rules.limits.signals.clone(),
                    cfg.stats_sql(),
                    cfg.settings.stats.stats_stuck_min_readings,
                    cfg.availability().map(|a| a.view),
                )),
        );
    }
    tracker.spawn(Maintainer::new(&cfg.upkeep()).run(shutdown.clone()));
    // The oldest-unacked age grows while nothing commits, so refresh it on a clock too.
    tracker.spawn(background.clone().run_until_cancelled_owned(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            ledger.publish_age(std::time::Instant::now());
        }
    }));
    tracker.close();
    Running {
        subscriber,
        batcher,
        writer,
        client,
        offline,
        hard_stop,
        background,
        tracker,
    }
}

/// With an independent list of brokers, a session with the subscription on every one, so that a
/// standby queues for this daemon before it moves there: the keeper (`standby.rs`) runs until
/// `background` ends, sharing the brokers' locks with `subscriber`.
fn with_standbys(
    subscriber: Subscriber,
    mqtt: &crate::intake::connect::MqttGroup,
    tracker: &TaskTracker,
    background: &CancellationToken,
) -> Subscriber {
    let independent = mqtt.brokers.kind == crate::intake::broker::Kind::Independent
        && mqtt.brokers.list.len() > 1;
    if !independent {
        return subscriber;
    }
    let sessions = standby::Sessions::new(mqtt.brokers.list.len(), mqtt.session_expiry);
    tracker.spawn(standby::keep(
        mqtt.clone(),
        subscriber.filters(),
        sessions.clone(),
        background.clone(),
    ));
    subscriber.sessions(sessions)
}

/// Waits for shutdown. A stage that ends before shutdown was asked for is a bug: stop loudly
/// rather than sit there taking no messages. (On shutdown the stages end by themselves, maybe
/// before this select sees the flag, so a finished task is judged by the flag.) Returns whether
/// the writers have ended.
async fn watch(r: &mut Running, shutdown: &CancellationToken) -> Result<bool, Error> {
    let mut writer_done = false;
    tokio::select! {
        biased;
        _ = shutdown.cancelled() => {}
        // The subscriber before the writer: when the subscriber stops with an error (a TLS
        // refusal), the writer runs dry and stops too, and the cause is the subscriber's.
        ended = &mut r.subscriber => {
            if let Ok(Err(e)) = ended {
                return Err(e);
            }
            if !shutdown.is_cancelled() {
                return Err(Error::other("the subscriber task", format!("stopped unexpectedly: {ended:?}")));
            }
            // It only ends on shutdown when it was never connected: nothing to ack, nothing
            // more to wait for from it.
            r.subscriber = tokio::spawn(async { Ok(()) });
        }
        ended = &mut r.writer => {
            writer_done = true;
            if !shutdown.is_cancelled() {
                return Err(Error::other("the writer task", format!("stopped unexpectedly: {ended:?}")));
            }
        }
    }
    Ok(writer_done)
}

/// The shutdown, in order, within `grace`: the subscriber stops handing messages on; the batcher
/// flushes its last batch; the writers commit and ack everything, then end (or are stopped
/// when the grace runs out); the DISCONNECT queues behind the last acks.
async fn stop(mut r: Running, grace: Duration, writer_done: bool) {
    let deadline = Instant::now() + grace;
    tracing::info!(grace = ?grace, "shutting down: committing and acknowledging what is in hand");
    let _ = timeout_at(deadline, r.batcher).await;
    if !writer_done && timeout_at(deadline, &mut r.writer).await.is_err() {
        r.hard_stop.cancel();
        let _ = r.writer.await;
    }
    // A Sparkplug B host says it is offline just before (a clean DISCONNECT sends no will).
    if let Some((topic, payload)) = r.offline {
        let qos = rumqttc::v5::mqttbytes::QoS::AtLeastOnce;
        if let Err(e) = r.client.try_publish(topic, qos, true, payload) {
            tracing::warn!(error = %e, "could not queue the Sparkplug B STATE (offline)");
        }
    }
    let _ = r.client.try_disconnect();
    if timeout_at(
        deadline.max(Instant::now()) + Duration::from_secs(2),
        &mut r.subscriber,
    )
    .await
    .is_err()
    {
        r.subscriber.abort();
    }
    r.background.cancel();
    r.tracker.wait().await;
}

/// Applies migrations, waiting (with backoff) while the database is unreachable. Returns false
/// if shutdown came first.
async fn migrate_when_reachable(cfg: &Config, shutdown: &CancellationToken) -> Result<bool, Error> {
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    loop {
        match apply_migrations(cfg).await {
            Ok(()) => return Ok(true),
            Err(e) if e.is_retryable() => {
                let wait = backoff.next_delay();
                tracing::warn!(error = %e, retry_in = ?wait, "database not reachable yet");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.cancelled() => return Ok(false),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Connects, applies pending migrations, disconnects. Creates the database first if it does not
/// exist yet (and the role may), so a first start needs no manual `createdb`.
pub async fn apply_migrations(cfg: &Config) -> Result<(), Error> {
    let mut client = match cfg.db.open().await {
        Err(e) if e.sqlstate() == Some("3D000") => {
            create_database(cfg).await?;
            cfg.db.open().await?
        }
        other => other?,
    };
    let applied = migrate::apply(&mut client, &cfg.rules.limits.signals).await;
    drop(client);
    let applied = applied?;
    if applied.migrations.is_empty() {
        tracing::info!("schema up to date");
    } else {
        tracing::info!(applied = ?applied.migrations, "migrations applied");
    }
    for change in applied.signals.iter().chain(&applied.distributed) {
        tracing::info!("{change}");
    }
    Ok(())
}

async fn create_database(cfg: &Config) -> Result<(), Error> {
    let name = cfg
        .db
        .config
        .get_dbname()
        .unwrap_or("galewatch")
        .to_string();
    let admin = cfg.db.with_dbname("postgres");
    let client = admin
        .open()
        .await
        .map_err(|e| e.prefixed(format!("creating the database {name} (it does not exist)")))?;
    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
    let created = client
        .batch_execute(&format!("CREATE DATABASE {quoted}"))
        .await;
    drop(client);

    match created {
        Ok(()) => {
            tracing::info!(database = %name, "created the database");
            Ok(())
        }
        // Another daemon created it meanwhile: before our CREATE began (42P04), or while it ran
        // (23505 on pg_database's name index: both inserted the name, theirs committed first).
        // Losing that race is success.
        Err(e)
            if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_DATABASE)
                || e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) =>
        {
            tracing::info!(database = %name, "another instance created the database first");
            Ok(())
        }
        Err(e) => Err(Error::db("creating the database", e)),
    }
}

/// A token cancelled on SIGTERM or Ctrl-C. The handlers are installed before this returns, so a
/// SIGTERM that comes early still shuts down cleanly.
pub fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let tx = token.clone();
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    let int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM received"),
                    _ = int.recv() => tracing::info!("interrupt received"),
                }
                tx.cancel();
            });
        }
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM/SIGINT")
        }
    }
    token
}
