//! `galewatch simulate`: publish a simulated fleet's traffic, as JSON or Sparkplug B.

use std::process::ExitCode;
use std::time::Duration;

use galewatch::daemon::config;
use galewatch::intake::broker::BrokerAddr;
use galewatch::tools::simulate::{self, Fleet, Knobs, Traffic};

use super::*;

#[derive(clap::Args)]
pub(crate) struct SimulateArgs {
    /// Broker URL.
    #[arg(
        long,
        env = "GALEWATCH_MQTT_URL",
        default_value = "mqtt://127.0.0.1:1883"
    )]
    mqtt_url: String,
    /// Number of turbines.
    #[arg(long, default_value_t = 900)]
    turbines: usize,
    /// Time between a turbine's readings.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Readings per turbine (default: until --duration, or until Ctrl-C).
    #[arg(long, conflicts_with = "duration")]
    readings: Option<usize>,
    /// How much fleet time to send (readings per turbine = duration / interval).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Readings per message (1 = one JSON object per message; more = a gateway's JSON array).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Fraction of messages sent again after --resend-delay (a turbine whose write timed out).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    resend_rate: f64,
    /// How long after the first copy a resend goes out (in a flood: how much fleet time later).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    resend_delay: Duration,
    /// Fraction of a drifting turbine's readings stamped with its previous reading's time but
    /// other values (a collision).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    drift_rate: f64,
    /// Only the first N turbines have drifting clocks (default: any).
    #[arg(long)]
    drifting_turbines: Option<usize>,
    /// Malformed messages, as a fraction of good ones, sent besides them.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    bad_rate: f64,
    /// As fast as the broker takes them (throughput runs); otherwise in real time.
    #[arg(long)]
    flood: bool,
    /// Turbine id prefix.
    #[arg(long, default_value = "WTG-")]
    prefix: String,
    /// Stamp the first reading at this time (RFC 3339), for reproducible data sets (default: now,
    /// or with --flood as far in the past as the run is long).
    #[arg(long)]
    start: Option<chrono::DateTime<chrono::Utc>>,
    /// Seed for the resend, drift and bad-message choices, and for the wind.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The site's mean wind speed (m/s): the wind swings around it with the weather, gusts and
    /// turbulence, and power follows a 3 MW curve (cut-in 3 m/s, rated at 12, cut-out 25).
    #[arg(long, default_value_t = 8.0, allow_negative_numbers = true)]
    mean_wind: f64,
    /// Turbulence intensity: the wind's standard deviation over a few seconds, over its mean.
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
    turbulence: f64,
    /// Fraction of each turbine's 10-minute slots spent stopped (a third for maintenance, the
    /// rest by faults).
    #[arg(long, default_value_t = 0.02, allow_negative_numbers = true)]
    stop_rate: f64,
    /// TURBINE:PERCENT: that turbine (0 is the first) produces PERCENT below its curve, as a
    /// soiled or mis-pitched one does. Repeatable.
    #[arg(long, value_name = "TURBINE:PERCENT", value_parser = galewatch::tools::site::parse_underperform)]
    underperform: Vec<(usize, f64)>,
    /// TURBINE[@AFTER[+FOR]]: that turbine's anemometer reads one value from AFTER into the run
    /// (default: the start), for FOR (default: to the end), while its power follows the wind
    /// (`2@10m+30m`). Repeatable.
    #[arg(long, value_name = "TURBINE[@AFTER[+FOR]]", value_parser = galewatch::tools::site::parse_stuck)]
    stuck_anemometer: Vec<(usize, galewatch::tools::site::Stretch)>,
    /// KW[@AFTER[+FOR]]: every turbine held at most KW over that span of the run (status
    /// partial performance; 0: a requested shutdown), as a grid operator asks (`1500@1h+20m`).
    #[arg(long, value_name = "KW[@AFTER[+FOR]]", allow_hyphen_values = true, value_parser = galewatch::tools::site::parse_curtail)]
    curtail: Option<(f64, galewatch::tools::site::Stretch)>,
    /// Leave out `status_code`, each reading's status (1 running, 2 curtailed, 4 no wind, 5
    /// maintenance, 6 fault, 7 shutdown: docs/simulator.md).
    #[arg(long)]
    no_status: bool,
    /// Publish as Sparkplug B edge nodes (births, aliases, sequence numbers, rebirth on
    /// request) instead of JSON; each node gateways --devices-per-node turbines.
    #[arg(long)]
    sparkplug: bool,
    /// With --sparkplug: the Sparkplug B group id.
    #[arg(long, default_value = "wind", requires = "sparkplug")]
    sparkplug_group: String,
    /// With --sparkplug: turbines (devices) per edge node.
    #[arg(long, default_value_t = 10, requires = "sparkplug")]
    devices_per_node: usize,
}

/// `galewatch simulate`: publishes a simulated fleet to the broker of `--mqtt-url`.
pub(super) fn simulate_cmd(runtime: &tokio::runtime::Runtime, args: SimulateArgs) -> ExitCode {
    if let Err(e) = config::check_environment() {
        return config_error(e);
    }
    let settings = config::Settings {
        broker: galewatch::intake::broker::BrokerSettings {
            mqtt_url: args.mqtt_url.clone(),
            ..Default::default()
        },
        ..Default::default()
    };
    let broker = match settings.validate() {
        Ok(c) if c.brokers.list.len() > 1 => {
            return config_error(galewatch::core::setting::SettingError::new(
                "mqtt_url",
                "simulate publishes to one broker: give one URL (run one simulate per node to publish to several)",
            ))
        }
        Ok(c) => c.brokers.list[0].clone(),
        Err(e) => return config_error(e),
    };
    runtime.block_on(publish_fleet(broker, args))
}

/// Publishes the fleet `a` describes, as JSON or (`--sparkplug`) as edge nodes, and says what
/// was sent.
async fn publish_fleet(broker: BrokerAddr, a: SimulateArgs) -> ExitCode {
    let readings = match (a.readings, a.duration) {
        (Some(n), _) => n,
        (None, Some(d)) => (d.as_secs_f64() / a.interval.as_secs_f64()).ceil() as usize,
        (None, None) if a.flood => {
            galewatch::say!("galewatch simulate: --flood needs --readings or --duration");
            return ExitCode::from(2);
        }
        (None, None) => usize::MAX,
    };
    let fleet = Fleet {
        turbines: a.turbines,
        readings,
        batch: a.batch,
        interval: a.interval,
        // Flood: stamp the past, so the whole run is history; real time: stamp from now.
        start: if let Some(start) = a.start {
            start
        } else if a.flood {
            // As far in the past as the run is long, when that is a time at all (check below
            // refuses an interval that is not).
            a.interval
                .checked_mul(readings.min(1 << 20) as u32)
                .and_then(|d| chrono::Duration::from_std(d).ok())
                .and_then(|d| chrono::Utc::now().checked_sub_signed(d))
                .unwrap_or_else(chrono::Utc::now)
        } else {
            chrono::Utc::now()
        },
        prefix: a.prefix.clone(),
        site: galewatch::tools::site::Site {
            seed: a.seed,
            mean_wind: a.mean_wind,
            turbulence: a.turbulence,
            stop_rate: a.stop_rate,
            underperforming: a.underperform.clone(),
            stuck_anemometer: a.stuck_anemometer.clone(),
            curtailment: a.curtail,
            status: !a.no_status,
            ..Default::default()
        },
    };
    let knobs = Knobs {
        resend_rate: a.resend_rate,
        resend_delay: a.resend_delay,
        drift_rate: a.drift_rate,
        drifting_turbines: a.drifting_turbines,
        bad_rate: a.bad_rate,
        seed: a.seed,
    };
    if let Err(e) = simulate::check(&fleet, &knobs) {
        galewatch::say!("galewatch simulate: {e}");
        return ExitCode::from(2);
    }
    let most = galewatch::intake::format::judge::Limits::new(
        galewatch::core::signals::Signals::defaults(),
    )
    .max_readings_per_message;
    if fleet.batch > most {
        galewatch::say!(
            "galewatch simulate: --batch {} is over the daemon's default max_readings_per_message ({}): unless it is raised, each such message is rejected too_large and the expect line does not hold",
            fleet.batch, most
        );
    }
    let stop = galewatch::daemon::shutdown_on_signal();
    let client_id = format!("galewatch-simulate-{}", std::process::id());
    let started = std::time::Instant::now();
    if a.sparkplug {
        return sparkplug_cmd(broker, fleet, knobs, a, stop, client_id).await;
    }
    match simulate::run(
        &broker,
        &client_id,
        Traffic::new(fleet, knobs),
        if a.flood {
            simulate::Pace::Flood
        } else {
            simulate::Pace::RealTime
        },
        stop,
    )
    .await
    {
        Ok(sent) => {
            let secs = started.elapsed().as_secs_f64();
            print_out(&format!(
                "{sent}\nin {secs:.2}s: {:.0} readings/s; the broker acknowledged every message",
                sent.all_readings() as f64 / secs
            ))
        }
        Err(e) => {
            galewatch::say!("galewatch simulate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `galewatch simulate --sparkplug`: the same fleet as edge nodes.
async fn sparkplug_cmd(
    broker: BrokerAddr,
    fleet: Fleet,
    knobs: Knobs,
    a: SimulateArgs,
    stop: tokio_util::sync::CancellationToken,
    client_id: String,
) -> ExitCode {
    let refuse = |why: &str| {
        galewatch::say!("galewatch simulate: {why}");
        ExitCode::from(2)
    };
    if knobs.drift_rate > 0.0 {
        return refuse("--drift-rate is not simulated with --sparkplug (an edge node's readings of one instant share one message)");
    }
    if a.devices_per_node == 0 {
        return refuse("--devices-per-node must be at least 1");
    }
    if a.sparkplug_group.is_empty()
        || a.sparkplug_group.contains(['/', '+', '#'])
        || a.sparkplug_group == "STATE"
    {
        return refuse("--sparkplug-group must be one topic level (no '/', '+' or '#'), not STATE");
    }
    if fleet.interval < Duration::from_millis(1) {
        return refuse(
            "--interval must be at least 1ms with --sparkplug (its timestamps are milliseconds)",
        );
    }
    let edge = galewatch::tools::edge::Edge {
        fleet,
        group: a.sparkplug_group,
        devices_per_node: a.devices_per_node,
    };
    let started = std::time::Instant::now();
    let traffic = galewatch::tools::edge::EdgeTraffic::new(edge, knobs);
    match galewatch::tools::edge::run(&broker, &client_id, traffic, a.flood, stop).await {
        Ok((sent, rebirths)) => {
            let secs = started.elapsed().as_secs_f64();
            print_out(&format!(
                "{sent}\n{rebirths} rebirths on request\nin {secs:.2}s: {:.0} readings/s; the broker acknowledged every message",
                sent.all_readings() as f64 / secs
            ))
        }
        Err(e) => {
            galewatch::say!("galewatch simulate: {e}");
            ExitCode::FAILURE
        }
    }
}
