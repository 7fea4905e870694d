//! Backoff: exponential waits between retries, with jitter so that several daemons that lost the
//! same server do not come back in lockstep.

use std::time::Duration;

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
    pub fn next_delay(&mut self) -> Duration {
        let step = self.next;
        self.next = (self.next * 2).min(self.max);
        step.mul_f64(rand::rng().random_range(0.8..=1.0))
    }

    /// After a success: the next failure waits the shortest time again.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
