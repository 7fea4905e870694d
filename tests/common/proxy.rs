//! A TCP proxy that swallows a daemon's PUBACKs on demand: acknowledgements lost between a
//! commit and the broker (tests/sparkplug_births.rs, tests/conformance.rs).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// A TCP proxy between a daemon and the broker that forwards everything, except that while
/// `drop_acks` is set it swallows the daemon's PUBACKs: messages the daemon committed and
/// acknowledged stay unacknowledged at the broker, which delivers them again to the next run, as
/// when a kill comes between a commit and its ack reaching the broker.
pub struct AckDropper {
    pub port: u16,
    pub drop_acks: Arc<AtomicBool>,
    /// PUBACKs passed on to the broker so far: the daemon handing an ack to its client is not
    /// the ack reaching the broker, and a test that starts dropping them waits for this first.
    pub acks_passed: Arc<AtomicUsize>,
    /// Daemon connections whose forwarding has not ended: a test that stops dropping after a
    /// kill waits for 0 first, or an ack the killed daemon wrote, read late, would reach the
    /// broker (and the broker would not deliver that message again).
    pub open: Arc<AtomicUsize>,
}

impl AckDropper {
    pub fn start(broker_port: u16) -> AckDropper {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let drop_acks = Arc::new(AtomicBool::new(false));
        let acks_passed = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let (dropping, passed, live) = (drop_acks.clone(), acks_passed.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", broker_port)) else {
                    return;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || copy(s2, c2));
                let (dropping, passed, live) = (dropping.clone(), passed.clone(), live.clone());
                live.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    filter_acks(client, server, &dropping, &passed);
                    live.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        AckDropper {
            port,
            drop_acks,
            acks_passed,
            open,
        }
    }

    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// Forwards MQTT packets from the daemon, leaving out PUBACKs while `dropping` (and counting in
/// `passed` those it forwards).
fn filter_acks(
    mut from: TcpStream,
    mut to: TcpStream,
    dropping: &AtomicBool,
    passed: &AtomicUsize,
) {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        // Whole packets: a fixed header byte, the remaining length (1–4 bytes), the body.
        loop {
            let mut len = 0usize;
            let mut i = 1;
            let mut complete = false;
            while i < pending.len() && i <= 4 {
                len |= usize::from(pending[i] & 0x7f) << (7 * (i - 1));
                if pending[i] & 0x80 == 0 {
                    complete = true;
                    break;
                }
                i += 1;
            }
            if !complete || pending.len() < i + 1 + len {
                break;
            }
            let packet: Vec<u8> = pending.drain(..i + 1 + len).collect();
            let puback = packet[0] >> 4 == 4;
            if puback && dropping.load(Ordering::SeqCst) {
                continue;
            }
            if to.write_all(&packet).is_err() {
                return;
            }
            if puback {
                passed.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let _ = to.shutdown(Shutdown::Both);
}
