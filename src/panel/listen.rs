//! Listen: the panel's connections, plain or TLS, each known by its peer's address, and held to
//! bounds that keep the panel answering whoever opens connections and says nothing.
//!
//! Every connection waits for its first byte in a task of its own (at most
//! [`gate::FIRST_BYTE`]; a TLS handshake, whole, within the same), then goes to the HTTP server,
//! where one with nothing read or written for [`gate::IDLE`] is closed. Open connections are
//! bounded per client address ([`gate::PER_ADDRESS`]) and in all ([`gate::TOTAL`]); at a bound,
//! the [`gate`] closes the oldest connection that has said nothing (then the one quiet longest)
//! to let a newcomer in, so a crowd of silent connections cannot shut out `/healthz`. A plain
//! HTTP request on the TLS port is answered 400 saying to use https://.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::gate::{self, Decision, Seen};

/// The address a connection comes from (axum's `ConnectInfo<Peer>`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub SocketAddr);

impl<Io> Connected<IncomingStream<'_, Gated<Io>>> for Peer
where
    Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn connect_info(stream: IncomingStream<'_, Gated<Io>>) -> Self {
        Peer(*stream.remote_addr())
    }
}

/// Connections past their first byte (and, with TLS, their handshake), for the HTTP server.
pub(crate) struct Gated<Io> {
    ready: mpsc::Receiver<(Io, SocketAddr)>,
    local: SocketAddr,
}

/// Plain HTTP connections.
pub(crate) type PlainListener = Gated<Guarded<TcpStream>>;
/// Connections that completed a TLS handshake.
pub(crate) type TlsListener = Gated<TlsStream<Guarded<TcpStream>>>;

impl PlainListener {
    /// Accepts on `tcp` in a task of its own until this listener is dropped.
    pub fn plain(tcp: TcpListener) -> io::Result<PlainListener> {
        Gated::start(tcp, |stream, _| async move { Ok(Some(stream)) })
    }
}

impl TlsListener {
    /// Accepts on `tcp` in a task of its own until this listener is dropped.
    pub fn tls(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> io::Result<TlsListener> {
        let acceptor = TlsAcceptor::from(config);
        Gated::start(tcp, move |stream, first| {
            let acceptor = acceptor.clone();
            async move { handshake(&acceptor, stream, first).await }
        })
    }
}

impl<Io: Send + 'static> Gated<Io> {
    /// Accepts on `tcp`; each connection waits for its first byte, then `open` makes it what the
    /// server reads (None: answered already, closed).
    fn start<F, Fut>(tcp: TcpListener, open: F) -> io::Result<Gated<Io>>
    where
        F: Fn(Guarded<TcpStream>, u8) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = io::Result<Option<Io>>> + Send + 'static,
    {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        tokio::spawn(accept(tcp, Arc::new(open), tx));
        Ok(Gated { ready, local })
    }
}

impl<Io> Listener for Gated<Io>
where
    Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Io = Io;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accepting task is gone (it ends only once this listener is dropped).
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// The open connections: what the gate decides over, and how to close each.
#[derive(Default)]
struct Registry {
    next: u64,
    open: HashMap<u64, (Seen, Arc<Activity>, CancellationToken)>,
}

/// The registry shared by the accepting task and every connection's guard.
type Shared = Arc<Mutex<Registry>>;

fn lock(r: &Shared) -> std::sync::MutexGuard<'_, Registry> {
    r.lock().unwrap_or_else(|e| e.into_inner())
}

/// When a connection last read or wrote, and last wrote, in milliseconds after `epoch` (0:
/// never).
struct Activity {
    epoch: Instant,
    last: AtomicU64,
    wrote: AtomicU64,
}

impl Activity {
    fn new(epoch: Instant) -> Activity {
        Activity {
            epoch,
            last: AtomicU64::new(0),
            wrote: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    fn touch(&self) {
        self.last.store(self.now(), Ordering::Relaxed);
    }

    fn answered(&self) {
        let now = self.now();
        self.last.store(now, Ordering::Relaxed);
        self.wrote.store(now, Ordering::Relaxed);
    }

    fn at(&self, ms: &AtomicU64) -> Option<Instant> {
        match ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(self.epoch + Duration::from_millis(ms - 1)),
        }
    }

    fn last(&self) -> Option<Instant> {
        self.at(&self.last)
    }

    fn wrote(&self) -> Option<Instant> {
        self.at(&self.wrote)
    }
}

async fn accept<Io, F, Fut>(tcp: TcpListener, open: Arc<F>, ready: mpsc::Sender<(Io, SocketAddr)>)
where
    Io: Send + 'static,
    F: Fn(Guarded<TcpStream>, u8) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = io::Result<Option<Io>>> + Send + 'static,
{
    let registry: Shared = Arc::default();
    let epoch = Instant::now();
    loop {
        let (stream, peer) = tokio::select! {
            _ = ready.closed() => return,
            r = tcp.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment, as axum does.
                    tracing::warn!(error = %e, "panel: accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(guarded) = admit(&registry, epoch, stream, peer) else {
            continue;
        };
        let (open, ready) = (open.clone(), ready.clone());
        tokio::spawn(async move {
            let first = tokio::time::timeout(gate::FIRST_BYTE, async {
                let mut guarded = guarded;
                let first = guarded.first_byte().await?;
                let io = open(guarded, first).await?;
                io::Result::Ok(io)
            });
            match first.await {
                Ok(Ok(Some(io))) => {
                    let _ = ready.send((io, peer)).await;
                }
                Ok(Ok(None)) => tracing::debug!(%peer, "panel: plain HTTP on the TLS port"),
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "panel: connection closed before a request")
                }
                Err(_) => {
                    tracing::debug!(%peer, "panel: nothing (or no whole TLS handshake) within the first-byte time")
                }
            }
        });
    }
}

/// Registers a new connection, closing another first if the gate says so; None: refused.
fn admit(
    registry: &Shared,
    epoch: Instant,
    stream: TcpStream,
    peer: SocketAddr,
) -> Option<Guarded<TcpStream>> {
    let mut r = lock(registry);
    let seen: Vec<Seen> = r
        .open
        .values()
        .map(|(s, activity, _)| Seen {
            active: activity.last(),
            answered: activity.wrote(),
            ..*s
        })
        .collect();
    match gate::admit(&seen, peer.ip(), Instant::now()) {
        Decision::Admit => {}
        Decision::Evict(id) => {
            if let Some((_, _, cancel)) = r.open.remove(&id) {
                cancel.cancel();
            }
        }
        Decision::Refuse => {
            tracing::debug!(%peer, "panel: no room for another connection; closed");
            return None;
        }
    }
    let id = r.next;
    r.next += 1;
    let activity = Arc::new(Activity::new(epoch));
    let cancel = CancellationToken::new();
    let seen = Seen {
        id,
        addr: peer.ip(),
        since: Instant::now(),
        active: None,
        answered: None,
    };
    r.open.insert(id, (seen, activity.clone(), cancel.clone()));
    Some(Guarded {
        inner: stream,
        activity,
        closed: Box::pin(cancel.cancelled_owned()),
        idle: Box::pin(tokio::time::sleep(gate::IDLE)),
        _leave: Leave {
            registry: registry.clone(),
            id,
        },
    })
}

/// Takes a connection off the registry when it ends.
struct Leave {
    registry: Shared,
    id: u64,
}

impl Drop for Leave {
    fn drop(&mut self) {
        lock(&self.registry).open.remove(&self.id);
    }
}

/// A connection held to the gate: it ends (an error to its reader or writer) when the gate
/// closes it for room, or after [`gate::IDLE`] with nothing read or written; its reads and
/// writes are what the gate sees as activity.
pub(crate) struct Guarded<S> {
    inner: S,
    activity: Arc<Activity>,
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
    idle: Pin<Box<tokio::time::Sleep>>,
    _leave: Leave,
}

impl Guarded<TcpStream> {
    /// Waits for the client's first byte and returns it without taking it.
    async fn first_byte(&mut self) -> io::Result<u8> {
        let mut first = [0u8; 1];
        let peeked = tokio::select! {
            r = self.inner.peek(&mut first) => r?,
            _ = &mut self.closed => return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "closed to make room")),
        };
        if peeked == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.activity.touch();
        Ok(first[0])
    }
}

impl<S> Guarded<S> {
    /// Err when the gate closed this connection or it sat idle too long; else registers to be
    /// woken for either.
    fn ended(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if self.closed.as_mut().poll(cx).is_ready() {
            return Some(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room",
            ));
        }
        if self.idle.as_mut().poll(cx).is_ready() {
            return Some(io::Error::new(io::ErrorKind::TimedOut, "idle"));
        }
        None
    }

    fn moved(&mut self, wrote: bool) {
        if wrote {
            self.activity.answered();
        } else {
            self.activity.touch();
        }
        self.idle
            .as_mut()
            .reset(tokio::time::Instant::now() + gate::IDLE);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    self.moved(false);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match self.ended(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.ended(cx) {
            return Poll::Ready(Err(e));
        }
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.moved(true);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The TLS handshake; or, when the client's first byte is not a TLS handshake record's (0x16),
/// a 400 saying to use https://, and None.
async fn handshake(
    acceptor: &TlsAcceptor,
    mut stream: Guarded<TcpStream>,
    first: u8,
) -> io::Result<Option<TlsStream<Guarded<TcpStream>>>> {
    if first != 0x16 {
        // Read what the client sent before answering, so that closing does not reset the
        // connection under the answer.
        let mut request = [0u8; 8192];
        let _ = stream.read(&mut request).await?;
        let body =
            "400: this port speaks HTTPS (the panel has panel_tls_cert_file): use https://\n";
        let answer = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        return Ok(None);
    }
    acceptor.accept(stream).await.map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn activity_is_told_to_the_millisecond_and_never_before_it_happens() {
        let a = Activity::new(Instant::now());
        assert_eq!(a.last(), None);
        a.touch();
        let t = a.last().unwrap();
        assert!(t <= Instant::now());
        assert_eq!(a.wrote(), None, "read, not answered");
        a.answered();
        assert!(a.wrote().unwrap() >= t);
    }
}
