//! Overlap: with several writers, batches that share a reading's key land in arrival order.
//!
//! Writers land batches side by side, so without a rule the later of two copies of a key could
//! commit first and a collision would keep the second reading, not the first. Each batch carries
//! the hashes of its readings' keys (made by the batcher); before a writer starts a batch it waits
//! until no earlier batch still in flight shares one. Batches that share no key, nearly all of
//! them (a resend comes a minute later, long after its first copy committed), never wait. A hash
//! collision only makes two batches wait for each other needlessly; it never reorders them.
//!
//! The lowest-numbered batch in flight never waits, so some writer always makes progress.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Whether two sorted lists of key hashes share one.
fn overlaps(a: &[u64], b: &[u64]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

/// The batches being written now, by number, with their sorted key hashes.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    batches: Mutex<BTreeMap<u64, Vec<u64>>>,
    /// Woken whenever a batch leaves.
    left: Notify,
}

/// A batch's place in [`InFlight`], given up when dropped (committed, or abandoned at the hard
/// stop).
#[derive(Debug)]
pub(crate) struct Flying {
    flight: Arc<InFlight>,
    seq: u64,
}

impl InFlight {
    /// Records batch `seq` as in flight. Called while the writer still holds the queue, so batches
    /// are recorded in their order and a later one never misses an earlier one.
    pub fn enter(self: &Arc<Self>, seq: u64, mut keys: Vec<u64>) -> Flying {
        keys.sort_unstable();
        keys.dedup();
        self.lock().insert(seq, keys);
        Flying {
            flight: self.clone(),
            seq,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Vec<u64>>> {
        self.batches
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether an earlier batch in flight shares a key with batch `seq`.
    fn blocked(&self, seq: u64) -> bool {
        let b = self.lock();
        let Some(mine) = b.get(&seq) else {
            return false;
        };
        if mine.is_empty() {
            return false;
        }
        b.range(..seq).any(|(_, theirs)| overlaps(theirs, mine))
    }

    /// Waits until no earlier batch in flight shares a key with batch `seq`.
    pub(crate) async fn wait_clear(&self, seq: u64) {
        loop {
            let left = self.left.notified();
            tokio::pin!(left);
            // Registered before looking, so a batch leaving in between still wakes us.
            left.as_mut().enable();
            if !self.blocked(seq) {
                return;
            }
            left.await;
        }
    }
}

impl Drop for Flying {
    fn drop(&mut self) {
        self.flight.lock().remove(&self.seq);
        self.flight.left.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    proptest! {
        /// The merge agrees with a set intersection, whatever the lists.
        #[test]
        fn overlaps_is_set_intersection(
            mut a in proptest::collection::vec(0u64..50, 0..30),
            mut b in proptest::collection::vec(0u64..50, 0..30),
        ) {
            let naive = a.iter().any(|x| b.contains(x));
            a.sort_unstable();
            b.sort_unstable();
            prop_assert_eq!(overlaps(&a, &b), naive);
        }
    }

    #[tokio::test]
    async fn a_batch_sharing_a_key_waits_for_the_earlier_one_and_others_do_not() {
        let f = Arc::new(InFlight::default());
        let first = f.enter(0, vec![1, 5, 9]);
        let sharing = f.enter(1, vec![9, 12]);
        let apart = f.enter(2, vec![2, 3]);
        // Batch 2 shares nothing with 0 or 1: it goes at once.
        tokio::time::timeout(Duration::from_millis(50), f.wait_clear(2))
            .await
            .expect("no shared key, no wait");
        // Batch 0 is the oldest: it never waits.
        tokio::time::timeout(Duration::from_millis(50), f.wait_clear(0))
            .await
            .expect("the oldest never waits");
        // Batch 1 shares key 9 with batch 0: it waits until batch 0 leaves.
        let waiting = tokio::spawn({
            let f = f.clone();
            async move { f.wait_clear(1).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "must wait for batch 0");
        drop(first);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("woken when batch 0 left")
            .unwrap();
        drop((sharing, apart));
        assert!(f.lock().is_empty(), "every batch left");
    }

    #[tokio::test]
    async fn a_later_batch_is_never_waited_for() {
        let f = Arc::new(InFlight::default());
        let _later = f.enter(7, vec![4]);
        let _earlier = f.enter(3, vec![4]);
        tokio::time::timeout(Duration::from_millis(50), f.wait_clear(3))
            .await
            .expect("only earlier batches count");
    }
}
