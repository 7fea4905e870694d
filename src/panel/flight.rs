//! Flight: identical requests within a second share one database query.
//!
//! Two hundred engineers opening the fleet page at once ask the same question; PostgreSQL should
//! answer it once, not two hundred times on two cores. The first request for a key runs the
//! query; those arriving while it runs, or up to `ttl` after it answered, get its answer. An
//! error is not kept: the next request asks again.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

/// When an answer was first asked for, and the answer (once it came).
type Slot<V> = (Instant, Arc<OnceCell<V>>);

/// Answers by key, each kept for `ttl` after it was first asked for.
pub struct Flights<K, V> {
    ttl: Duration,
    map: Mutex<HashMap<K, Slot<V>>>,
}

impl<K: Eq + Hash + Clone, V: Clone> Flights<K, V> {
    pub fn new(ttl: Duration) -> Self {
        Flights {
            ttl,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The answer for `key`: shared if one is in flight or fresh, else `ask`'s.
    pub async fn get<E, F, Fut>(&self, key: K, ask: F) -> Result<V, E>
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
                    map.insert(key, (now, cell.clone()));
                    cell
                }
            }
        };
        cell.get_or_try_init(ask).await.cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn concurrent_askers_share_one_answer_and_errors_are_not_kept() {
        let f: Arc<Flights<&str, u32>> = Arc::new(Flights::new(Duration::from_millis(200)));
        let asked = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let (f, asked) = (f.clone(), asked.clone());
            tasks.push(tokio::spawn(async move {
                f.get("fleet", || async {
                    asked.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<_, ()>(7)
                })
                .await
            }));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap(), Ok(7));
        }
        assert_eq!(
            asked.load(Ordering::SeqCst),
            1,
            "one query for fifty askers"
        );
        // Another key is its own question.
        assert_eq!(f.get("other", || async { Ok::<_, ()>(8) }).await, Ok(8));
        // After the ttl, asked again.
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(f.get("fleet", || async { Ok::<_, ()>(9) }).await, Ok(9));
        // An error is not kept.
        assert_eq!(
            f.get("err", || async { Err::<u32, _>("down") }).await,
            Err("down")
        );
        assert_eq!(f.get("err", || async { Ok::<_, &str>(1) }).await, Ok(1));
    }
}
