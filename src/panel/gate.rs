//! Gate: which connections the panel keeps when a new one arrives — a pure decision over the
//! open connections, bounded per client address and in all, that makes room by closing a
//! connection that has said nothing (the oldest first), then one idle the longest, before it
//! turns a newcomer away. [`listen`](super::listen) does the I/O.

use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Open connections one client address may hold (a browser opens about six; an office behind
/// one NAT address, or a script, more).
pub(crate) const PER_ADDRESS: usize = 128;
/// Open connections in all (each is a file descriptor; the database pool needs some too).
pub(crate) const TOTAL: usize = 512;
/// A connection must send its first byte within this (a TLS handshake, its whole).
pub(crate) const FIRST_BYTE: Duration = Duration::from_secs(10);
/// An open connection with nothing read or written for this long is closed.
pub(crate) const IDLE: Duration = Duration::from_secs(60);
/// An open connection quiet for at least this long may be closed to make room.
const IDLE_ENOUGH_TO_CLOSE: Duration = Duration::from_secs(2);
/// A connection that has sent bytes and been answered nothing for this long (a request dribbled
/// a byte at a time, or stalled) may be closed to make room, however lately it sent a byte.
const STALLED: Duration = Duration::from_secs(5);

/// What the gate knows of an open connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub id: u64,
    pub addr: IpAddr,
    /// When it connected.
    pub since: Instant,
    /// When it last read or wrote a byte; None: it never sent one.
    pub active: Option<Instant>,
    /// When the panel last wrote to it; None: never.
    pub answered: Option<Instant>,
}

/// What to do with a newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Admit,
    /// Admit it once this connection is closed.
    Evict(u64),
    /// No room: close the newcomer.
    Refuse,
}

/// The decision for a newcomer from `addr` at `now`, given the open connections.
pub(crate) fn admit(open: &[Seen], addr: IpAddr, now: Instant) -> Decision {
    let mine = open.iter().filter(|s| s.addr == addr).count();
    let pool: Vec<&Seen> = if mine >= PER_ADDRESS {
        open.iter().filter(|s| s.addr == addr).collect()
    } else if open.len() >= TOTAL {
        open.iter().collect()
    } else {
        return Decision::Admit;
    };
    victim(&pool, now).map_or(Decision::Refuse, Decision::Evict)
}

/// The connection to close for room: the oldest that never sent a byte; else the one stalled
/// the longest, if [`STALLED`] (it sent something and has been answered nothing since it
/// connected or was last answered); else the one quiet the longest if it has been quiet
/// [`IDLE_ENOUGH_TO_CLOSE`].
fn victim(pool: &[&Seen], now: Instant) -> Option<u64> {
    if let Some(s) = pool
        .iter()
        .filter(|s| s.active.is_none())
        .min_by_key(|s| (s.since, s.id))
    {
        return Some(s.id);
    }
    let unanswered = |s: &Seen| now.saturating_duration_since(s.answered.unwrap_or(s.since));
    if let Some(s) = pool
        .iter()
        .filter(|s| s.answered.is_none_or(|a| s.active.is_some_and(|t| t > a)))
        .filter(|s| unanswered(s) >= STALLED)
        .max_by_key(|s| (unanswered(s), std::cmp::Reverse(s.id)))
    {
        return Some(s.id);
    }
    pool.iter()
        .filter_map(|s| s.active.map(|a| (a, s.id)))
        .filter(|(a, _)| now.saturating_duration_since(*a) >= IDLE_ENOUGH_TO_CLOSE)
        .min()
        .map(|(_, id)| id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    fn seen(id: u64, addr: IpAddr, since: Instant, active: Option<Instant>) -> Seen {
        Seen {
            id,
            addr,
            since,
            active,
            answered: None,
        }
    }

    #[test]
    fn a_dribbling_request_is_closed_for_room_once_stalled() {
        let t0 = Instant::now();
        // Each sent a byte just now, none was ever answered: a slow request each.
        let open: Vec<Seen> = (0..PER_ADDRESS as u64)
            .map(|i| seen(i, ip(1), t0 + Duration::from_millis(i), Some(t0 + STALLED)))
            .collect();
        let just_now = t0 + STALLED;
        assert_eq!(
            admit(&open, ip(1), just_now),
            Decision::Evict(0),
            "the one stalled longest"
        );
        assert_eq!(
            admit(&open, ip(1), t0 + STALLED / 2),
            Decision::Refuse,
            "not stalled yet"
        );
        // One answered after its last byte is waiting for its next request, not stalled.
        let answered: Vec<Seen> = open
            .iter()
            .map(|s| Seen {
                answered: Some(just_now),
                ..*s
            })
            .collect();
        assert_eq!(
            admit(&answered, ip(1), just_now + Duration::from_secs(1)),
            Decision::Refuse
        );
    }

    #[test]
    fn a_silent_crowd_makes_room_for_a_newcomer_from_the_same_address() {
        let t0 = Instant::now();
        let open: Vec<Seen> = (0..PER_ADDRESS as u64)
            .map(|i| seen(i, ip(1), t0 + Duration::from_millis(i), None))
            .collect();
        assert_eq!(admit(&open, ip(1), t0), Decision::Evict(0), "the oldest");
        assert_eq!(admit(&open, ip(2), t0), Decision::Admit, "another address");
    }

    #[test]
    fn busy_connections_are_kept_and_the_newcomer_refused() {
        let t0 = Instant::now();
        let open: Vec<Seen> = (0..PER_ADDRESS as u64)
            .map(|i| seen(i, ip(1), t0, Some(t0)))
            .collect();
        assert_eq!(admit(&open, ip(1), t0), Decision::Refuse);
        let later = t0 + IDLE_ENOUGH_TO_CLOSE;
        assert_eq!(admit(&open, ip(1), later), Decision::Evict(0));
    }

    #[test]
    fn the_total_bound_takes_from_anyone() {
        let t0 = Instant::now();
        let open: Vec<Seen> = (0..TOTAL as u64)
            .map(|i| {
                let active = if i == 7 { None } else { Some(t0) };
                seen(i, ip((i % 200) as u8), t0, active)
            })
            .collect();
        assert_eq!(admit(&open, ip(250), t0), Decision::Evict(7));
    }

    proptest! {
        #[test]
        fn admitting_as_told_keeps_both_bounds(
            arrivals in proptest::collection::vec((0u8..20, any::<bool>()), 1..1500),
        ) {
            let t0 = Instant::now();
            let mut open: Vec<Seen> = Vec::new();
            for (i, (a, talks)) in arrivals.into_iter().enumerate() {
                let now = t0 + Duration::from_millis(i as u64);
                match admit(&open, ip(a), now) {
                    Decision::Admit => {}
                    Decision::Evict(id) => {
                        let before = open.len();
                        open.retain(|s| s.id != id);
                        prop_assert_eq!(open.len(), before - 1, "evicts an open one");
                    }
                    Decision::Refuse => continue,
                }
                open.push(seen(i as u64, ip(a), now, talks.then_some(now)));
                prop_assert!(open.len() <= TOTAL);
                prop_assert!(open.iter().filter(|s| s.addr == ip(a)).count() <= PER_ADDRESS);
            }
        }
    }
}
