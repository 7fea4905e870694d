//! Ack: send each message's PUBACK once the transaction holding its outcome has committed, in
//! arrival order, and never on a connection other than the one the message came on.
//!
//! After a reconnect the broker redelivers unacknowledged messages under their old packet ids,
//! and after a reconnect without a session a packet id names a different message altogether, so
//! an ack owed to an earlier connection is dropped: the broker redelivers that message and the
//! database absorbs the copy. The connection epoch is guarded by a mutex that the subscriber
//! takes to move to a new connection, so no ack can slip into the request channel for the old
//! connection after the subscriber has cleared it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rumqttc::v5::mqttbytes::v5::Publish;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, ClientError};

use crate::telemetry;

/// Identifies what to acknowledge: the connection a message came on and its packet id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckToken {
    pub epoch: u64,
    pub pkid: u16,
    pub qos: QoS,
}

/// The number of the broker connection in use, shared by the subscriber (which moves it on) and
/// the acker (which compares against it).
#[derive(Debug, Clone, Default)]
pub struct Epoch(Arc<Mutex<u64>>);

impl Epoch {
    pub fn current(&self) -> u64 {
        *self.lock()
    }

    /// Holds the epoch still while the caller works; see [`Epoch::advance`].
    pub fn lock(&self) -> MutexGuard<'_, u64> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Moves to the next connection. Runs `then` (the subscriber's clearing of queued acks) while
    /// the acker is locked out, so no old ack is queued after the clearing.
    pub fn advance(&self, then: impl FnOnce()) -> u64 {
        let mut g = self.lock();
        *g += 1;
        then();
        *g
    }
}

/// Queues PUBACKs on the MQTT client without ever waiting on the event loop.
///
/// `try_ack` fails when the client's request channel is full; those acks stay here, in order,
/// and [`Acker::flush`] is called again until they are out. The event loop drains the channel
/// whenever it is polled, and the subscriber never waits on the acker, so this always ends.
pub struct Acker {
    client: AsyncClient,
    epoch: Epoch,
    pending: VecDeque<AckToken>,
}

impl Acker {
    pub fn new(client: AsyncClient, epoch: Epoch) -> Self {
        Acker {
            client,
            epoch,
            pending: VecDeque::new(),
        }
    }

    /// Acknowledges committed messages, in the order given.
    pub fn ack(&mut self, tokens: impl IntoIterator<Item = AckToken>) -> usize {
        self.pending.extend(tokens);
        self.flush()
    }

    /// Queues as many pending acks as the channel takes; returns how many still wait.
    pub fn flush(&mut self) -> usize {
        let current = self.epoch.lock();
        let mut sent = 0u64;
        let mut stale = 0u64;
        while let Some(t) = self.pending.front().copied() {
            if t.epoch != *current {
                stale += 1;
            } else if t.qos != QoS::AtMostOnce {
                let p = Publish {
                    pkid: t.pkid,
                    qos: t.qos,
                    ..Publish::default()
                };
                match self.client.try_ack(&p) {
                    Ok(()) => sent += 1,
                    Err(ClientError::TryRequest(_)) => break,
                    // The event loop is gone (shutting down): nothing more can be acked, and
                    // the broker will redeliver what was not.
                    Err(_) => {
                        stale += self.pending.len() as u64;
                        self.pending.clear();
                        break;
                    }
                }
            }
            self.pending.pop_front();
        }
        drop(current);
        metrics::counter!(telemetry::ACKS_SENT).increment(sent);
        metrics::counter!(telemetry::ACKS_DROPPED_STALE).increment(stale);
        self.pending.len()
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// The arrival times and payload sizes of the messages handed on and not yet acknowledged,
/// oldest first, for the gauges. Messages are acknowledged in the order they were handed on, so
/// the writer removes from the front.
#[derive(Debug, Clone, Default)]
pub struct Unacked(Arc<Mutex<Held>>);

#[derive(Debug, Default)]
struct Held {
    queue: VecDeque<(Instant, usize)>,
    bytes: usize,
}

impl Unacked {
    fn lock(&self) -> MutexGuard<'_, Held> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn push(&self, arrived: Instant, bytes: usize) {
        let mut h = self.lock();
        h.queue.push_back((arrived, bytes));
        h.bytes += bytes;
        publish(&h);
    }

    /// The oldest `n` are done (acknowledged, or their acks dropped as stale).
    pub fn done(&self, n: usize) {
        let mut h = self.lock();
        let n = n.min(h.queue.len());
        let freed: usize = h.queue.drain(..n).map(|(_, b)| b).sum();
        h.bytes -= freed;
        publish(&h);
        drop(h);
        self.publish_age(Instant::now());
    }

    /// Sets the oldest-unacked-age gauge.
    pub fn publish_age(&self, now: Instant) {
        let age = self
            .lock()
            .queue
            .front()
            .map_or(0.0, |(t, _)| (now - *t).as_secs_f64());
        metrics::gauge!(telemetry::OLDEST_UNACKED_SECONDS).set(age);
    }
}

fn publish(h: &Held) {
    metrics::gauge!(telemetry::MESSAGES_UNACKED).set(h.queue.len() as f64);
    metrics::gauge!(telemetry::BYTES_UNACKED).set(h.bytes as f64);
}
