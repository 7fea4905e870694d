//! Link: the broker connection's bookkeeping as a pure state machine (no I/O, no clock read):
//! which broker of `mqtt_url` comes next and how long to wait, whether a refusal before any
//! connection is a setting to fix, and whether connections lost within seconds of being made
//! mean another client takes the session. The subscriber tells it what happened and acts on
//! its answer (logs, gauges, the next address), as rumqttc's `state.rs` keeps MQTT's rules
//! apart from its event loop.

use std::time::{Duration, Instant};

use crate::intake::broker::BrokerAddr;
use crate::intake::failover::Failover;

/// A connection lost this soon after it was made is brief.
const BRIEF: Duration = Duration::from_secs(5);

/// Brief connections in a row, on one broker with no failed attempt between, that mark another
/// client taking the session under the same client id.
pub(crate) const TAKEN_AFTER: u32 = 3;

/// What the broker refused an attempt for, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not refused: the network, a timeout, a broker going away.
    None,
    /// TLS refused the peer (a certificate, an alert).
    Tls,
    /// The broker answered CONNACK with a refusal (credentials, client id, authorisation).
    Connack,
}

/// What to do after a connection was lost or an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterLoss {
    /// `galewatch leave` lost a connection it had: most likely the member, still running, took
    /// its session back; retrying would take it again, for ever. Stop.
    SessionTaken,
    /// Before any connection, every broker of the list refused this (TLS or the CONNACK): the
    /// same settings will be refused again, a setting to fix (exit 2). The last broker tried is
    /// the one given.
    RefusedByAll(Refusal, BrokerAddr),
    /// Try again.
    Retry(Retry),
}

/// The next attempt, and what the loss was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// The broker lost (or that failed the attempt).
    pub from: BrokerAddr,
    /// The broker tried next, after `wait`.
    pub next: BrokerAddr,
    pub wait: Duration,
    /// A connection that was up (else an attempt that failed).
    pub was_up: bool,
    /// Brief connections in a row on `from` (0 when this one was not brief): at
    /// [`TAKEN_AFTER`] or more, another client most likely takes the session.
    pub brief_in_a_row: u32,
}

/// The connection's bookkeeping.
#[derive(Debug)]
pub struct Link {
    failover: Failover,
    /// For `galewatch leave`.
    leaving: bool,
    ever_connected: bool,
    /// Before any connection: the brokers (by position) that refused TLS or the CONNACK.
    refused_before_connect: Vec<bool>,
    /// When the current connection was made; None while down.
    connected_at: Option<Instant>,
    brief_in_a_row: u32,
    /// The broker of those brief connections.
    brief_on: Option<BrokerAddr>,
}

impl Link {
    pub fn new(failover: Failover, leaving: bool) -> Link {
        Link {
            refused_before_connect: vec![false; failover.len()],
            failover,
            leaving,
            ever_connected: false,
            connected_at: None,
            brief_in_a_row: 0,
            brief_on: None,
        }
    }

    /// This is `galewatch leave`'s connection: losing it once made ends the run.
    pub fn leaving(&mut self) {
        self.leaving = true;
    }

    /// The brokers, their order and the one current.
    pub fn failover(&self) -> &Failover {
        &self.failover
    }

    /// Whether any connection was made yet.
    pub(crate) fn ever_connected(&self) -> bool {
        self.ever_connected
    }

    /// Whether a connection is up.
    pub fn is_up(&self) -> bool {
        self.connected_at.is_some()
    }

    /// A connection to the current broker was made at `now`.
    pub fn connected(&mut self, now: Instant) {
        self.failover.connected();
        self.ever_connected = true;
        self.connected_at = Some(now);
    }

    /// The connection was lost, or an attempt failed, at `now`, refused for `refusal`.
    pub fn lost(&mut self, refusal: Refusal, now: Instant) -> AfterLoss {
        if self.leaving && self.ever_connected {
            return AfterLoss::SessionTaken;
        }
        if !self.ever_connected && refusal != Refusal::None {
            // One broker of several refusing goes on to the next; all of them, a setting.
            self.refused_before_connect[self.failover.index()] = true;
            if self.refused_before_connect.iter().all(|r| *r) {
                return AfterLoss::RefusedByAll(refusal, self.failover.current().clone());
            }
        }
        let from = self.failover.current().clone();
        let was_up = self.connected_at.is_some();
        // Lost within seconds of being made, on one broker, with no failed attempt between:
        // Mosquitto closes the older of two connections with one client id without a word. A
        // broker that refuses or does not answer an attempt is failing (as is a list whose
        // brokers die in turn), not another client taking the session.
        let brief = self
            .connected_at
            .take()
            .is_some_and(|at| now.saturating_duration_since(at) < BRIEF);
        self.brief_in_a_row = match (brief, self.brief_on.as_ref() == Some(&from)) {
            (false, _) => 0,
            (true, true) => self.brief_in_a_row + 1,
            (true, false) => 1,
        };
        self.brief_on = brief.then(|| from.clone());
        let wait = self.failover.failed();
        AfterLoss::Retry(Retry {
            from,
            next: self.failover.current().clone(),
            wait,
            was_up,
            brief_in_a_row: self.brief_in_a_row,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::broker::Order;
    use proptest::prelude::*;

    fn broker(port: u16) -> BrokerAddr {
        BrokerAddr {
            host: "127.0.0.1".into(),
            port,
            tls: false,
        }
    }

    fn link(n: u16, leaving: bool) -> Link {
        let brokers = (0..n).map(|i| broker(1883 + i)).collect();
        Link::new(Failover::new(brokers, Order::Listed, 7), leaving)
    }

    fn retry(a: AfterLoss) -> Retry {
        match a {
            AfterLoss::Retry(r) => r,
            other => panic!("not a retry: {other:?}"),
        }
    }

    #[test]
    fn a_refusal_before_any_connection_ends_the_run_only_once_every_broker_refused() {
        let t = Instant::now();
        let mut l = link(3, false);
        let r = retry(l.lost(Refusal::Connack, t));
        assert_eq!((r.from.port, r.next.port, r.was_up), (1883, 1884, false));
        // A broker that does not answer is not a refusal: still not all.
        assert!(matches!(l.lost(Refusal::None, t), AfterLoss::Retry(_)));
        assert!(matches!(l.lost(Refusal::Tls, t), AfterLoss::Retry(_)));
        // 1883 again (the list went round): it refused before, 1884 never did.
        assert!(matches!(l.lost(Refusal::Connack, t), AfterLoss::Retry(_)));
        assert_eq!(
            l.lost(Refusal::Connack, t),
            AfterLoss::RefusedByAll(Refusal::Connack, broker(1884))
        );
    }

    #[test]
    fn once_connected_a_refusal_is_waited_out_and_leaving_stops_on_any_loss() {
        let t = Instant::now();
        let mut l = link(1, false);
        l.connected(t);
        let r = retry(l.lost(Refusal::Connack, t + Duration::from_secs(60)));
        assert!(r.was_up);
        assert!(!l.is_up());
        let mut leave = link(2, true);
        assert!(matches!(leave.lost(Refusal::None, t), AfterLoss::Retry(_)));
        leave.connected(t);
        assert_eq!(leave.lost(Refusal::None, t), AfterLoss::SessionTaken);
    }

    #[test]
    fn brief_connections_on_one_broker_count_up_and_anything_else_resets_them() {
        let t = Instant::now();
        let mut l = link(1, false);
        let second = Duration::from_secs(1);
        for want in 1..=4 {
            l.connected(t);
            assert_eq!(
                retry(l.lost(Refusal::None, t + second)).brief_in_a_row,
                want
            );
        }
        // A failed attempt between: not the mark of a takeover.
        assert_eq!(retry(l.lost(Refusal::None, t)).brief_in_a_row, 0);
        l.connected(t);
        assert_eq!(retry(l.lost(Refusal::None, t + second)).brief_in_a_row, 1);
        // A connection that lasted: back to 0.
        l.connected(t);
        assert_eq!(retry(l.lost(Refusal::None, t + BRIEF)).brief_in_a_row, 0);
    }

    proptest! {
        /// Whatever happens, the next broker is one of the list, the wait at most the
        /// back-off's ceiling, and a run ends only for leaving or when every broker refused
        /// before any connection.
        #[test]
        fn any_sequence_of_events_keeps_the_rules(
            n in 1u16..5,
            leaving in any::<bool>(),
            events in proptest::collection::vec((0u8..4, 0u64..20), 1..60),
        ) {
            let t0 = Instant::now();
            let mut l = link(n, leaving);
            let mut refused = std::collections::HashSet::new();
            let mut at = t0;
            for (kind, secs) in events {
                at += Duration::from_secs(secs);
                if kind == 3 {
                    l.connected(at);
                    prop_assert!(l.is_up());
                    continue;
                }
                let refusal = [Refusal::None, Refusal::Tls, Refusal::Connack][kind as usize];
                let ever = l.ever_connected();
                let current = l.failover().current().clone();
                match l.lost(refusal, at) {
                    AfterLoss::SessionTaken => {
                        prop_assert!(leaving && ever);
                        return Ok(());
                    }
                    AfterLoss::RefusedByAll(r, b) => {
                        prop_assert!(!ever && r == refusal && r != Refusal::None);
                        refused.insert(b.port);
                        prop_assert_eq!(refused.len(), n as usize, "every broker refused");
                        return Ok(());
                    }
                    AfterLoss::Retry(r) => {
                        prop_assert_eq!(&r.from, &current);
                        prop_assert!((1883..1883 + n).contains(&r.next.port));
                        prop_assert!(r.wait <= crate::intake::failover::MAX_WAIT);
                        prop_assert!(!l.is_up());
                        if !ever && refusal != Refusal::None {
                            refused.insert(r.from.port);
                        }
                    }
                }
            }
        }
    }
}
