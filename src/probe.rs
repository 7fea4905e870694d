//! Probe: what a process embedding the daemon (the demo, a test) reads of it directly, without
//! scraping its `/metrics`: whether it is ready, and the counters of what has committed.
//!
//! The daemon moves these at the same moments as the Prometheus counters (after each commit),
//! so the two always agree; the probe works whether or not a metrics recorder is installed.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::core::outcome::Tally;

/// Counts the messages received and not yet acknowledged.
type Unacked = Arc<dyn Fn() -> usize + Send + Sync>;

/// A handle on a running daemon; clones share it.
#[derive(Clone)]
pub struct Probe {
    inner: Arc<Inner>,
}

struct Inner {
    totals: Mutex<Totals>,
    ready: watch::Sender<bool>,
    /// Counts the messages held unacknowledged (the intake's ledger, attached by the daemon).
    unacked: Mutex<Option<Unacked>>,
}

impl Default for Probe {
    fn default() -> Self {
        Probe {
            inner: Arc::new(Inner {
                totals: Mutex::default(),
                ready: watch::channel(false).0,
                unacked: Mutex::default(),
            }),
        }
    }
}

/// What has committed since the daemon started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// The batches' tallies added up (`inserted_at` stays empty: the lags are summed instead).
    pub committed: Tally,
    /// Sum of the ingest lag (commit time − `recorded_at`) of the `committed.inserted` readings.
    pub lag_sum_seconds: f64,
}

impl Probe {
    /// The committed counters now.
    pub fn totals(&self) -> Totals {
        self.inner
            .totals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Messages received and not yet acknowledged.
    pub fn unacked(&self) -> usize {
        self.inner
            .unacked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, |count| count())
    }

    /// Whether the daemon takes messages now (subscribed; see `galewatch_ready`).
    pub fn is_ready(&self) -> bool {
        *self.inner.ready.borrow()
    }

    /// A receiver that changes with readiness.
    pub fn ready(&self) -> watch::Receiver<bool> {
        self.inner.ready.subscribe()
    }

    pub(crate) fn set_ready(&self, ready: bool) {
        self.inner.ready.send_replace(ready);
    }

    pub(crate) fn attach(&self, unacked: Unacked) {
        *self.inner.unacked.lock().unwrap_or_else(|p| p.into_inner()) = Some(unacked);
    }

    /// A batch committed with this tally; `lag` is the sum of its readings' ingest lags.
    pub(crate) fn committed(&self, tally: &Tally, lag_sum_seconds: f64) {
        let mut t = self.inner.totals.lock().unwrap_or_else(|p| p.into_inner());
        t.committed.add_counts(tally);
        t.lag_sum_seconds += lag_sum_seconds;
    }
}
