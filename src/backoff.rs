//! Backoff: exponential waits between retries, with jitter so that several daemons that lost the
//! same server do not come back in lockstep; and how often a retried failure is logged.

use std::time::{Duration, Instant};

use rand::Rng;

#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max,
            next: first,
        }
    }

    /// The wait before the next try: doubles each call up to `max`, each drawn from 80–100% of
    /// its step.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let step = self.next;
        self.next = (self.next * 2).min(self.max);
        jitter(step)
    }

    /// After a success: the next failure waits the shortest time again.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

/// `step` drawn from 80–100 %: waits that do not line up across daemons.
pub fn jitter(step: Duration) -> Duration {
    step.mul_f64(rand::rng().random_range(0.8..=1.0))
}

/// At most one log line per `every` for a failure retried many times (the same refusal on each
/// reconnect): the first is said at once, the rest only once the time has passed.
#[derive(Debug, Clone)]
pub(crate) struct Quiet {
    every: Duration,
    last: Option<Instant>,
}

impl Quiet {
    pub fn new(every: Duration) -> Self {
        Quiet { every, last: None }
    }

    /// Whether to log at `now`; if so, the next one waits `every` from `now`.
    pub fn due(&mut self, now: Instant) -> bool {
        let due = self
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= self.every);
        if due {
            self.last = Some(now);
        }
        due
    }

    /// The next [`Quiet::due`] is due at once (a new episode begins).
    pub fn reset(&mut self) {
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_says_the_first_then_once_per_period() {
        let mut q = Quiet::new(Duration::from_secs(60));
        let t = Instant::now();
        assert!(q.due(t));
        assert!(!q.due(t + Duration::from_secs(59)));
        assert!(q.due(t + Duration::from_secs(60)));
        assert!(!q.due(t + Duration::from_secs(61)));
        // A clock read out of order (earlier than the last) is not due.
        assert!(!q.due(t));
        assert!(q.due(t + Duration::from_secs(200)));
    }

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(350));
        let d: Vec<u128> = (0..4).map(|_| b.next_delay().as_millis()).collect();
        assert!((80..=100).contains(&d[0]), "{d:?}");
        assert!((160..=200).contains(&d[1]), "{d:?}");
        assert!((280..=350).contains(&d[2]), "{d:?}");
        assert!((280..=350).contains(&d[3]), "{d:?}");
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }
}
