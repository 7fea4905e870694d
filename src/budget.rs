//! Budget: how much the daemon may hold unacknowledged, counted two ways (readings and payload
//! bytes); intake waits for room in both, and a committed batch gives its share back.
//!
//! Counting items alone let a few large messages take unbounded memory (a thousand 1 MiB
//! malformed messages are a thousand items but a gigabyte); counting bytes alone would let many
//! tiny messages of many readings do the same. A message's cost is clamped to the whole budget,
//! so one message larger than the budget still passes, alone.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The two limits, shared by the subscriber (which takes) and the writer (which gives back, by
/// dropping the [`Held`] of committed messages).
#[derive(Debug, Clone)]
pub struct Budget {
    readings: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    max_readings: usize,
    max_bytes: usize,
}

/// One message's share of the budget, given back when dropped.
#[derive(Debug)]
pub struct Held {
    _readings: OwnedSemaphorePermit,
    _bytes: OwnedSemaphorePermit,
}

impl Budget {
    pub fn new(max_readings: usize, max_bytes: usize) -> Self {
        Budget {
            readings: Arc::new(Semaphore::new(max_readings)),
            bytes: Arc::new(Semaphore::new(max_bytes)),
            max_readings,
            max_bytes,
        }
    }

    /// What a message of `items` items and `bytes` payload bytes costs: at least one reading
    /// (every message is accounted for) and never more than the whole budget.
    pub fn cost(&self, items: usize, bytes: usize) -> (u32, u32) {
        let clamp = |n: usize, max: usize| u32::try_from(n.min(max)).unwrap_or(u32::MAX);
        (
            clamp(items.max(1), self.max_readings),
            clamp(bytes, self.max_bytes),
        )
    }

    /// Waits until the message fits, then holds its share. Only the subscriber calls this, and
    /// it takes readings before bytes, so two takers can never hold each other up.
    pub async fn take(&self, items: usize, bytes: usize) -> Held {
        let (r, b) = self.cost(items, bytes);
        let readings = self
            .readings
            .clone()
            .acquire_many_owned(r)
            .await
            .expect("the budget's semaphores are never closed");
        let bytes = self
            .bytes
            .clone()
            .acquire_many_owned(b)
            .await
            .expect("the budget's semaphores are never closed");
        Held {
            _readings: readings,
            _bytes: bytes,
        }
    }

    /// Readings and bytes free now.
    pub fn available(&self) -> (usize, usize) {
        (
            self.readings.available_permits(),
            self.bytes.available_permits(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn cost_is_at_least_one_reading_and_at_most_the_budget() {
        let b = Budget::new(100, 1000);
        assert_eq!(b.cost(0, 0), (1, 0));
        assert_eq!(b.cost(5, 200), (5, 200));
        assert_eq!(b.cost(1_000_000, 1 << 30), (100, 1000));
    }

    #[tokio::test]
    async fn bytes_bound_what_readings_would_allow() {
        let b = Budget::new(1000, 3 * 1024);
        let held: Vec<Held> = futures_util::future::join_all((0..3).map(|_| b.take(1, 1024))).await;
        assert_eq!(b.available(), (997, 0));
        // A fourth 1 KiB message waits although 997 readings are free...
        let fourth = tokio::time::timeout(Duration::from_millis(50), b.take(1, 1024)).await;
        assert!(fourth.is_err(), "must wait for bytes");
        // ...until one is given back.
        drop(held);
        let _fourth = tokio::time::timeout(Duration::from_millis(50), b.take(1, 1024))
            .await
            .expect("room after the give-back");
        assert_eq!(b.available(), (999, 2 * 1024));
    }

    #[tokio::test]
    async fn a_message_larger_than_the_budget_passes_alone() {
        let b = Budget::new(10, 100);
        let big = b.take(1, 10_000).await;
        assert_eq!(b.available(), (9, 0));
        assert!(
            tokio::time::timeout(Duration::from_millis(50), b.take(1, 1))
                .await
                .is_err()
        );
        drop(big);
        assert_eq!(b.available(), (10, 100));
    }
}
