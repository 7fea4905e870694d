//! Failover: which broker of `mqtt_url` the next connection goes to, and how long to wait before
//! trying it. Pure: the subscriber tells it of each success and failure and does the I/O.
//!
//! A lost connection, or a failed attempt, moves on to the next broker of the round at once (a
//! short, jittered pause, not the back-off), so a daemon whose node died is on another within a
//! second; only when every broker of a round has failed in a row does the exponential back-off
//! grow. With one URL this is the back-off alone, as before the list existed.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::backoff::Backoff;
use crate::intake::broker::{BrokerAddr, Order};

/// The shortest wait, and the longest, between two attempts.
const FIRST_WAIT: Duration = Duration::from_millis(200);
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct Failover {
    brokers: Vec<BrokerAddr>,
    order: Order,
    /// This round's order: indexes into `brokers`, each once.
    round: Vec<usize>,
    /// Where in `round` the broker in use (or being tried) is.
    pos: usize,
    /// Attempts failed in a row (a lost connection counts as one) since the last connection.
    failures: usize,
    backoff: Backoff,
    rng: SmallRng,
}

impl Failover {
    /// `brokers` is never empty (`BrokerAddr::parse_list` refuses an empty list); `seed` draws
    /// the random order.
    pub fn new(brokers: Vec<BrokerAddr>, order: Order, seed: u64) -> Failover {
        assert!(!brokers.is_empty(), "a failover needs at least one broker");
        let mut f = Failover {
            round: (0..brokers.len()).collect(),
            brokers,
            order,
            pos: 0,
            failures: 0,
            backoff: Backoff::new(FIRST_WAIT, MAX_WAIT),
            rng: SmallRng::seed_from_u64(seed),
        };
        if order == Order::Random {
            f.round.shuffle(&mut f.rng);
        }
        f
    }

    /// The broker to connect to now.
    pub fn current(&self) -> &BrokerAddr {
        &self.brokers[self.index()]
    }

    /// Its position in `mqtt_url`, from 0.
    pub fn index(&self) -> usize {
        self.round[self.pos]
    }

    /// How many brokers there are.
    pub fn len(&self) -> usize {
        self.brokers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.brokers.is_empty()
    }

    /// Whether the last failure ended a round in which every broker failed in a row.
    pub(crate) fn round_failed(&self) -> bool {
        self.failures > 0 && self.failures % self.brokers.len() == 0
    }

    /// Attempts failed in a row (a lost connection counts as one).
    pub fn failures(&self) -> usize {
        self.failures
    }

    /// A connection was made (CONNACK): the next failure starts from the shortest wait again.
    pub fn connected(&mut self) {
        self.failures = 0;
        self.backoff.reset();
    }

    /// A connection was lost or an attempt failed: moves on to the next broker and returns how
    /// long to wait before trying it. Within a round the wait is short (80–100 % of
    /// [`FIRST_WAIT`]); after a whole round failed in a row, it is the back-off's next step.
    pub fn failed(&mut self) -> Duration {
        self.failures += 1;
        let failed = self.index();
        self.pos += 1;
        if self.pos == self.round.len() {
            self.pos = 0;
            if self.order == Order::Random && self.round.len() > 1 {
                self.round.shuffle(&mut self.rng);
                // Never the one that just failed first in the new round.
                if self.round[0] == failed {
                    let last = self.round.len() - 1;
                    self.round.swap(0, self.rng.random_range(1..=last));
                }
            }
        }
        if self.failures % self.brokers.len() == 0 {
            self.backoff.next_delay()
        } else {
            crate::backoff::jitter(FIRST_WAIT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn brokers(n: usize) -> Vec<BrokerAddr> {
        (0..n)
            .map(|i| BrokerAddr {
                host: format!("n{i}"),
                port: 1883,
                tls: false,
            })
            .collect()
    }

    #[test]
    fn one_broker_is_the_back_off_alone() {
        let mut f = Failover::new(brokers(1), Order::Listed, 1);
        let waits: Vec<Duration> = (0..10).map(|_| f.failed()).collect();
        assert_eq!(f.index(), 0);
        for (i, w) in waits.iter().enumerate() {
            let step = (FIRST_WAIT * 2u32.pow(i as u32)).min(MAX_WAIT);
            assert!(
                *w >= step.mul_f64(0.8) && *w <= step,
                "wait {i}: {w:?} for a step of {step:?}"
            );
        }
        f.connected();
        assert!(f.failed() <= FIRST_WAIT, "a connection resets the back-off");
    }

    #[test]
    fn listed_goes_round_from_the_first_and_backs_off_after_a_round() {
        let mut f = Failover::new(brokers(3), Order::Listed, 7);
        assert_eq!(f.index(), 0, "the first URL first");
        let mut seen = vec![];
        let mut waits = vec![];
        for _ in 0..7 {
            waits.push(f.failed());
            seen.push(f.index());
        }
        assert_eq!(seen, [1, 2, 0, 1, 2, 0, 1]);
        // Moves within a round are short; a failed round backs off, longer each time.
        for i in [0, 1, 3, 4, 6] {
            assert!(waits[i] <= FIRST_WAIT, "move {i}: {:?}", waits[i]);
        }
        assert!(
            waits[2] <= FIRST_WAIT,
            "the first round's back-off is its first step"
        );
        assert!(waits[5] > FIRST_WAIT, "the second round's back-off doubled");
    }

    #[test]
    fn a_connection_in_between_keeps_the_place_and_resets_the_wait() {
        let mut f = Failover::new(brokers(3), Order::Listed, 7);
        f.failed();
        f.failed();
        assert_eq!(f.index(), 2);
        f.connected();
        // n3 is lost later: on to n1, a short wait, not a back-off.
        assert!(f.failed() <= FIRST_WAIT);
        assert_eq!(f.index(), 0);
    }

    proptest! {
        /// Whatever the seed and the count: every broker is tried once in each round, the one
        /// that just failed is never tried again at once, and the waits stay within bounds.
        #[test]
        fn every_round_tries_each_broker_once(n in 1usize..8, seed: u64, random: bool, rounds in 1usize..6) {
            let order = if random { Order::Random } else { Order::Listed };
            let mut f = Failover::new(brokers(n), order, seed);
            for _ in 0..rounds {
                let mut tried = vec![f.index()];
                for _ in 1..n {
                    let before = f.index();
                    let w = f.failed();
                    prop_assert!(w <= MAX_WAIT);
                    prop_assert_ne!(f.index(), before);
                    tried.push(f.index());
                }
                tried.sort_unstable();
                prop_assert_eq!(tried, (0..n).collect::<Vec<_>>());
                let before = f.index();
                let w = f.failed();
                prop_assert!(w <= MAX_WAIT);
                if n > 1 {
                    prop_assert_ne!(f.index(), before, "the next round does not start with the one that failed");
                }
            }
        }
    }

    #[test]
    fn random_spreads_the_first_choice() {
        let firsts: std::collections::BTreeSet<usize> = (0..64)
            .map(|seed| Failover::new(brokers(3), Order::Random, seed).index())
            .collect();
        assert_eq!(
            firsts.len(),
            3,
            "daemons of a share group start on different nodes"
        );
    }
}
