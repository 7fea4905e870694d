//! Leave: retire a member of a share group for good — unsubscribe, land everything its session
//! still holds, then end the session.
//!
//! Why it exists: Mosquitto keeps dealing a stopped member its share of the group's messages
//! into its persistent session, where they wait until `mqtt_session_expiry` and are then lost.
//! `galewatch leave`, run with the member's settings while the member is stopped, resumes that
//! session, unsubscribes at once (so nothing more is dealt to it), runs the ordinary pipeline
//! (ack after commit) on what arrives, and when the session has run dry connects once more
//! with a clean start and a session expiry of 0, which makes the broker discard it.
//!
//! "Run dry" is decided here, apart from the network: the UNSUBSCRIBE was acknowledged, nothing
//! is held unacknowledged, and no message arrived for [`QUIET`]. With nothing unacknowledged
//! the broker's in-flight window is empty, so a session that still held messages would be
//! sending them; the quiet period covers the round trip.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rumqttc::v5::mqttbytes::v5::Packet;
use rumqttc::v5::{AsyncClient, Event};

use crate::error::Error;
use crate::intake::connect::MqttGroup;

/// How long nothing may arrive, with nothing held, before the session counts as drained.
pub(crate) const QUIET: Duration = Duration::from_secs(2);

/// What the subscriber tells the leaving run (shared between the two tasks).
#[derive(Debug)]
pub(crate) struct Leaving {
    /// The broker acknowledged the UNSUBSCRIBE: nothing new is dealt to the session.
    unsubscribed: AtomicBool,
    /// The broker had no session for this client id: there is nothing to land.
    no_session: AtomicBool,
    /// A connection was made (whatever the broker held).
    connected: AtomicBool,
    /// When the last message (or the UNSUBACK) arrived.
    last_event: Mutex<Instant>,
}

impl Default for Leaving {
    fn default() -> Self {
        Leaving {
            unsubscribed: AtomicBool::new(false),
            no_session: AtomicBool::new(false),
            connected: AtomicBool::new(false),
            last_event: Mutex::new(Instant::now()),
        }
    }
}

impl Leaving {
    pub(crate) fn unsubscribed(&self) {
        self.touch();
        self.unsubscribed.store(true, Ordering::SeqCst);
    }

    pub(crate) fn no_session(&self) {
        self.no_session.store(true, Ordering::SeqCst);
    }

    pub(crate) fn connected(&self) {
        self.connected.store(true, Ordering::SeqCst);
    }

    /// Whether a connection to the broker was ever made.
    pub(crate) fn was_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    pub(crate) fn touch(&self) {
        *self.last_event.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Whether the session has been emptied, given how many messages are held unacknowledged.
    pub(crate) fn drained(&self, held: usize, now: Instant) -> bool {
        let last = *self.last_event.lock().unwrap_or_else(|p| p.into_inner());
        is_drained(
            self.no_session.load(Ordering::SeqCst),
            self.unsubscribed.load(Ordering::SeqCst),
            held,
            now.saturating_duration_since(last),
        )
    }

    pub(crate) fn had_no_session(&self) -> bool {
        self.no_session.load(Ordering::SeqCst)
    }
}

/// The decision, pure: no session at all, or unsubscribed with nothing held and nothing new for
/// [`QUIET`].
fn is_drained(no_session: bool, unsubscribed: bool, held: usize, quiet_for: Duration) -> bool {
    no_session || (unsubscribed && held == 0 && quiet_for >= QUIET)
}

/// How long `galewatch leave` tries to reach a broker before it reports it not reached.
pub(crate) const REACH: Duration = Duration::from_secs(20);

/// Ends the member's session on `broker`: a clean-start connection with a session expiry of 0
/// replaces it, and the DISCONNECT that follows leaves nothing behind there.
pub(crate) async fn end_session(
    g: &MqttGroup,
    broker: &crate::intake::broker::BrokerAddr,
) -> Result<(), Error> {
    let mut opts = crate::intake::connect::connect_options(g, broker);
    opts.set_clean_start(true)
        .set_session_expiry_interval(Some(0));
    let (client, mut eventloop) = AsyncClient::new(opts, 10);
    let work = async {
        loop {
            match eventloop.poll().await {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    client
                        .disconnect()
                        .await
                        .map_err(|e| Error::other("ending the session", e))?;
                }
                Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect)) => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(Error::other("ending the session", e)),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), work)
        .await
        .map_err(|_| {
            Error::other(
                "ending the session",
                "the broker did not answer within 20 s",
            )
        })?
}

/// What `galewatch leave` did, for its last lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub messages: u64,
    pub readings: u64,
    /// Whether any broker held a session for the member.
    pub had_session: bool,
    /// The brokers whose session of the member was ended.
    pub ended: Vec<crate::intake::broker::BrokerAddr>,
    /// The brokers of `mqtt_url` not reached within [`REACH`] (or one connect timeout, if longer),
    /// or whose session could not be ended, and why: a session there may remain.
    pub left_behind: Vec<(crate::intake::broker::BrokerAddr, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drained_only_when_unsubscribed_empty_and_quiet() {
        let q = QUIET;
        assert!(
            is_drained(true, false, 5, Duration::ZERO),
            "no session: nothing to land"
        );
        assert!(!is_drained(false, false, 0, q), "still subscribed");
        assert!(
            !is_drained(false, true, 1, q),
            "a message not yet committed"
        );
        assert!(
            !is_drained(false, true, 0, q - Duration::from_millis(1)),
            "not quiet yet"
        );
        assert!(is_drained(false, true, 0, q));
    }
}
