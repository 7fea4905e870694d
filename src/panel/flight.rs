//! Flight: identical requests within a second share one database query.
//!
//! Two hundred engineers opening the fleet page at once ask the same question; PostgreSQL should
//! answer it once, not two hundred times on two cores. The first request for a key runs the
//! query; those arriving while it runs, or up to `ttl` after it answered, get its answer. An
//! error goes to those who waited for it (so a database that hangs costs one wait, not one per
//! request in turn) and is not kept: the next request asks again.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

/// An answer, or the error shared by everyone who waited for it.
type Answer<V, E> = Result<V, Arc<E>>;
/// When an answer was first asked for, and the answer (once it came).
type Slot<V, E> = (Instant, Arc<OnceCell<Answer<V, E>>>);

/// Answers by key, each kept for `ttl` after it was first asked for.
pub(crate) struct Flights<K, V, E> {
    ttl: Duration,
    map: Mutex<HashMap<K, Slot<V, E>>>,
}

impl<K: Eq + Hash + Clone, V: Clone, E> Flights<K, V, E> {
    pub fn new(ttl: Duration) -> Self {
        Flights {
            ttl,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The answer for `key`: shared if one is in flight or fresh, else `ask`'s.
    pub async fn get<F, Fut>(&self, key: K, ask: F) -> Answer<V, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<V, E>>,
    {
        let cell = {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            if map.len() > 256 {
                map.retain(|_, (at, _)| now.duration_since(*at) < self.ttl);
            }
            match map.get(&key) {
                Some((at, cell)) if now.duration_since(*at) < self.ttl => cell.clone(),
                _ => {
                    let cell = Arc::new(OnceCell::new());
                    map.insert(key.clone(), (now, cell.clone()));
                    cell
                }
            }
        };
        let answer = cell
            .get_or_init(|| async { ask().await.map_err(Arc::new) })
            .await
            .clone();
        if answer.is_err() {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            if map.get(&key).is_some_and(|(_, c)| Arc::ptr_eq(c, &cell)) {
                map.remove(&key);
            }
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    type F = Arc<Flights<&'static str, u32, &'static str>>;

    async fn many(f: &F, key: &'static str, n: usize, answer: Result<u32, &'static str>) -> usize {
        let asked = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..n {
            let (f, asked) = (f.clone(), asked.clone());
            tasks.push(tokio::spawn(async move {
                f.get(key, || async {
                    asked.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    answer
                })
                .await
            }));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap().map_err(|e| *e), answer);
        }
        asked.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn concurrent_askers_share_one_answer_and_one_error() {
        let f: F = Arc::new(Flights::new(Duration::from_millis(200)));
        assert_eq!(
            many(&f, "fleet", 50, Ok(7)).await,
            1,
            "one query for fifty askers"
        );
        // Another key is its own question.
        assert_eq!(f.get("other", || async { Ok(8) }).await.unwrap(), 8);
        // Within the ttl the answer is kept; after it, asked again.
        assert_eq!(f.get("fleet", || async { Ok(0) }).await.unwrap(), 7);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(f.get("fleet", || async { Ok(9) }).await.unwrap(), 9);
        // An error reaches everyone waiting for it, from one query...
        assert_eq!(
            many(&f, "err", 20, Err("down")).await,
            1,
            "one failing query, not twenty"
        );
        // ...and is not kept.
        assert_eq!(f.get("err", || async { Ok(1) }).await.unwrap(), 1);
    }
}
