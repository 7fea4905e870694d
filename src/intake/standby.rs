//! Standby: with a list of independent brokers (`mqtt_url_kind = "independent"`), a persistent
//! session with the subscription on every broker of `mqtt_url`, not only on the one in use, so
//! that a standby queues for this daemon what publishers send it before the daemon ever moves
//! there. A broker keeps messages only for sessions it holds: without this, what a fleet sent a
//! standby before the daemon's first connection there went nowhere.
//!
//! The keeper visits each broker the daemon is not connected to — connects as the daemon's
//! client id with a clean start off and the session expiry on, subscribes, disconnects — at
//! start, again every [`REVISIT_UNREACHED`] while one cannot be reached, and every
//! [`REFRESH`] after (a broker restarted without persistence forgets sessions). A visit never takes anything:
//! messages a standby delivers to it go unacknowledged and stay in the session, for the daemon's
//! own connection to land once it moves there. The daemon's connection and a visit never meet on
//! one broker (each broker has a lock: the connection holds its broker's, a visit tries for its
//! own), so neither takes the session from under the other. When to visit is [`due`], pure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rumqttc::v5::mqttbytes::v5::{Packet, SubscribeReasonCode};
use rumqttc::v5::{AsyncClient, Event};
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::intake::broker::BrokerAddr;
use crate::intake::connect::{connect_options, subscription, MqttGroup};
use crate::telemetry;

/// How soon a broker that could not be visited is tried again.
const REVISIT_UNREACHED: Duration = Duration::from_secs(30);
/// How often a standby's session is visited again once held: a broker restarted without
/// persistence forgets it (a visit then finds none, says so and makes it again), so this bounds
/// how long such a broker drops what it is sent for the daemon. A session expiry shorter than
/// twice this is visited sooner.
const REFRESH: Duration = Duration::from_secs(60);
/// How often the keeper looks at what is due.
const LOOK_EVERY: Duration = Duration::from_secs(5);

/// What the keeper knows of one broker's session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Known {
    /// When it was last made sure of (a visit, or the daemon's own connection there).
    pub held_at: Option<Instant>,
    /// When the last visit failed, if the last try failed.
    pub failed_at: Option<Instant>,
}

/// Whether a broker is due a visit at `now`, with sessions expiring after `expiry`: never made
/// sure of; failed at least [`REVISIT_UNREACHED`] ago; held for [`REFRESH`] or half its expiry,
/// whichever is shorter.
pub fn due(k: &Known, now: Instant, expiry: Duration) -> bool {
    let since = |t: Instant| now.saturating_duration_since(t);
    match (k.held_at, k.failed_at) {
        (_, Some(f)) => since(f) >= REVISIT_UNREACHED,
        (None, None) => true,
        (Some(h), None) => since(h) >= REFRESH.min(expiry / 2),
    }
}

/// How many sessions count as held at `now`: made sure of within two refresh periods (and
/// before they could expire).
pub fn held(known: &[Known], now: Instant, expiry: Duration) -> usize {
    let fresh = (REFRESH * 2).min(expiry);
    known
        .iter()
        .filter(|k| {
            k.failed_at.is_none()
                && k.held_at
                    .is_some_and(|h| now.saturating_duration_since(h) < fresh)
        })
        .count()
}

/// The brokers' locks and what is known of their sessions, shared by the daemon's connection
/// and the keeper.
pub struct Sessions {
    locks: Vec<Arc<Mutex<()>>>,
    known: std::sync::Mutex<Vec<Known>>,
    expiry: Duration,
    /// When the last visit began and ended (None while one runs): a connection of the daemon
    /// lost during a visit is the mark of a cluster's nodes listed as independent brokers.
    visit: std::sync::Mutex<(Option<Instant>, Option<Instant>)>,
}

impl Sessions {
    pub fn new(brokers: usize, expiry: Duration) -> Arc<Sessions> {
        Arc::new(Sessions {
            locks: (0..brokers).map(|_| Arc::new(Mutex::new(()))).collect(),
            known: std::sync::Mutex::new(vec![Known::default(); brokers]),
            expiry,
            visit: std::sync::Mutex::new((None, None)),
        })
    }

    /// Whether a visit ran within the last two seconds (or runs now).
    pub(crate) fn visited_lately(&self) -> bool {
        let (began, ended) = *self.visit.lock().unwrap_or_else(|p| p.into_inner());
        match (began, ended) {
            (Some(_), None) => true,
            (_, Some(end)) => end.elapsed() < Duration::from_secs(2),
            (None, None) => false,
        }
    }

    fn visiting(&self, now: bool) {
        let mut v = self.visit.lock().unwrap_or_else(|p| p.into_inner());
        *v = if now {
            (Some(Instant::now()), None)
        } else {
            (v.0, Some(Instant::now()))
        };
    }

    /// The daemon's connection takes broker `index` (waiting out a visit there); it keeps the
    /// guard while it connects and is connected.
    pub(crate) async fn claim(&self, index: usize) -> OwnedMutexGuard<()> {
        self.locks[index].clone().lock_owned().await
    }

    /// The daemon's connection was made to broker `index`: its session is held.
    pub fn connected(&self, index: usize) {
        self.note(index, Ok(()));
    }

    fn note(&self, index: usize, visit: Result<(), ()>) {
        let now = Instant::now();
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known[index] = match visit {
            Ok(()) => Known {
                held_at: Some(now),
                failed_at: None,
            },
            Err(()) => Known {
                failed_at: Some(now),
                ..known[index]
            },
        };
        metrics::gauge!(telemetry::BROKER_SESSIONS_HELD).set(held(&known, now, self.expiry) as f64);
    }

    fn due_now(&self) -> Vec<usize> {
        let now = Instant::now();
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        metrics::gauge!(telemetry::BROKER_SESSIONS_HELD).set(held(&known, now, self.expiry) as f64);
        (0..known.len())
            .filter(|i| due(&known[*i], now, self.expiry))
            .collect()
    }
}

/// Visits the brokers of `g` as they fall due until `shutdown`, skipping the one the daemon's
/// connection holds.
pub async fn keep(
    g: MqttGroup,
    filters: Vec<String>,
    sessions: Arc<Sessions>,
    shutdown: CancellationToken,
) {
    let brokers = g.brokers.list.clone();
    // The daemon's own connection takes its broker's lock first (a visit there would only delay
    // it).
    tokio::time::sleep(Duration::from_millis(500)).await;
    loop {
        for i in sessions.due_now() {
            let Ok(_guard) = sessions.locks[i].clone().try_lock_owned() else {
                continue; // the daemon's own connection is there
            };
            let broker = &brokers[i];
            sessions.visiting(true);
            let visited = tokio::select! {
                v = visit(&g, &filters, broker) => v,
                _ = shutdown.cancelled() => return,
            };
            sessions.visiting(false);
            let was = sessions.known.lock().unwrap_or_else(|p| p.into_inner())[i];
            match visited {
                Ok(present) => {
                    if !present && was.held_at.is_some() && was.failed_at.is_none() {
                        tracing::warn!(
                            broker = %broker,
                            "a standby broker had forgotten this daemon's session (restarted without persistence?): what it was sent since it forgot is not kept; the session and its subscription are made again"
                        );
                    } else if was.held_at.is_none() || was.failed_at.is_some() {
                        tracing::info!(
                            broker = %broker,
                            session_present = present,
                            "standby broker holds this daemon's session and subscription: it queues what it is sent until the daemon moves there"
                        );
                    }
                    sessions.note(i, Ok(()));
                }
                Err(e) => {
                    if was.failed_at.is_none() {
                        tracing::warn!(
                            broker = %broker,
                            error = %e,
                            retry_in = ?REVISIT_UNREACHED,
                            "could not visit a standby broker of mqtt_url: what publishers send it before the daemon moves there is not kept for the daemon; trying again"
                        );
                    }
                    sessions.note(i, Err(()));
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(LOOK_EVERY) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// One visit: connect to `broker` as the daemon (clean start off, the session's expiry),
/// subscribe to `filters`, disconnect, leaving the session there. Whether the broker already
/// held it.
pub async fn visit(g: &MqttGroup, filters: &[String], broker: &BrokerAddr) -> Result<bool, Error> {
    let mut opts = connect_options(g, broker);
    opts.set_clean_start(false)
        .set_session_expiry_interval(Some(
            u32::try_from(g.session_expiry.as_secs()).unwrap_or(u32::MAX),
        ))
        // Whatever the session holds stays there, unacknowledged: one message in flight at most.
        .set_receive_maximum(Some(1))
        .set_max_packet_size(Some(g.max_packet_bytes))
        .set_manual_acks(true);
    let (client, mut eventloop) = AsyncClient::new(opts, 10);
    let context = || format!("visiting the standby broker {broker} (mqtt_url)");
    let work = async {
        let mut present = false;
        loop {
            match eventloop.poll().await {
                Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                    present = ack.session_present;
                    client
                        .subscribe_many(filters.iter().map(|f| subscription(f)))
                        .await
                        .map_err(|e| Error::other("subscribing on a standby broker", e))?;
                }
                Ok(Event::Incoming(Packet::SubAck(ack))) => {
                    if let Some(code) = ack
                        .return_codes
                        .iter()
                        .find(|c| !matches!(c, SubscribeReasonCode::Success(_)))
                    {
                        return Err(Error::other(
                            "subscribing on a standby broker",
                            format!("refused: {code:?}"),
                        ));
                    }
                    client
                        .disconnect()
                        .await
                        .map_err(|e| Error::other("leaving a standby broker", e))?;
                }
                Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect)) => return Ok(present),
                Ok(_) => {}
                Err(e) => return Err(Error::broker(context(), e)),
            }
        }
    };
    tokio::time::timeout(g.brokers.connect_timeout + Duration::from_secs(5), work)
        .await
        .map_err(|_| Error::other("visiting a standby broker", "no answer in time"))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WEEK: Duration = Duration::from_secs(7 * 86_400);

    #[test]
    fn visits_fall_due_first_after_a_failure_and_before_expiry() {
        let t0 = Instant::now();
        assert!(due(&Known::default(), t0, WEEK), "never made sure of");
        let failed = Known {
            held_at: None,
            failed_at: Some(t0),
        };
        assert!(!due(&failed, t0 + REVISIT_UNREACHED / 2, WEEK));
        assert!(due(&failed, t0 + REVISIT_UNREACHED, WEEK));
        let held_now = Known {
            held_at: Some(t0),
            failed_at: None,
        };
        assert!(!due(&held_now, t0 + REFRESH / 2, WEEK));
        assert!(due(&held_now, t0 + REFRESH, WEEK));
        // A short expiry is refreshed at half of it.
        let one_min = Duration::from_secs(60);
        assert!(due(&held_now, t0 + one_min / 2, one_min));
        assert!(!due(&held_now, t0 + one_min / 3, one_min));
    }

    #[test]
    fn held_counts_sessions_made_sure_of_and_not_failed_since() {
        let t0 = Instant::now();
        let k = |held: Option<u64>, failed: Option<u64>| Known {
            held_at: held.map(|s| t0 + Duration::from_secs(s)),
            failed_at: failed.map(|s| t0 + Duration::from_secs(s)),
        };
        let now = t0 + Duration::from_secs(100);
        assert_eq!(
            held(
                &[k(Some(0), None), k(None, Some(50)), k(None, None)],
                now,
                WEEK
            ),
            1
        );
        assert_eq!(held(&[k(Some(0), Some(90))], now, WEEK), 0, "failed since");
        let long_after = t0 + WEEK * 2;
        assert_eq!(held(&[k(Some(0), None)], long_after, WEEK), 0, "expired");
    }

    proptest! {
        /// However visits go, a broker is never due again sooner than its rule says, and one
        /// that failed is always due again within REVISIT_UNREACHED.
        #[test]
        fn a_failed_broker_is_tried_again_within_the_revisit_time(
            outcomes in proptest::collection::vec(any::<bool>(), 1..50),
        ) {
            let t0 = Instant::now();
            let mut k = Known::default();
            let mut now = t0;
            for ok in outcomes {
                prop_assert!(due(&k, now, WEEK) || k.failed_at.is_none());
                k = if ok {
                    Known { held_at: Some(now), failed_at: None }
                } else {
                    Known { failed_at: Some(now), ..k }
                };
                now += REVISIT_UNREACHED;
                if !ok {
                    prop_assert!(due(&k, now, WEEK));
                } else {
                    prop_assert!(!due(&k, now, WEEK));
                }
            }
        }
    }
}
