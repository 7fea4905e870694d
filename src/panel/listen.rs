//! Listen: the panel's connections, plain or TLS, each known by its peer's address.
//!
//! TLS handshakes run side by side (at most [`HANDSHAKES_AT_ONCE`], each within
//! [`HANDSHAKE_TIMEOUT`]), so a slow or silent client holds up no one; a plain HTTP request on
//! the TLS port is answered 400 saying to use https://, not dropped without a word.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

const HANDSHAKES_AT_ONCE: usize = 256;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The address a connection comes from (axum's `ConnectInfo<Peer>`).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl Connected<IncomingStream<'_, TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        Peer(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        Peer(*stream.remote_addr())
    }
}

/// Connections that completed a TLS handshake.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Accepts on `tcp` in a task of its own until this listener is dropped.
    pub fn new(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        tokio::spawn(accept(tcp, TlsAcceptor::from(config), tx));
        Ok(TlsListener { ready, local })
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
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

async fn accept(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let handshakes = Arc::new(Semaphore::new(HANDSHAKES_AT_ONCE));
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
        let Ok(permit) = handshakes.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "panel: too many TLS handshakes at once; connection dropped");
            continue;
        };
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&acceptor, stream)).await {
                Ok(Ok(Some(tls))) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Ok(None)) => tracing::debug!(%peer, "panel: plain HTTP on the TLS port"),
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "panel: TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "panel: TLS handshake timed out"),
            }
        });
    }
}

/// The TLS handshake; or, when the client's first byte is not a TLS handshake record's (0x16),
/// a 400 saying to use https://, and None.
async fn handshake(
    acceptor: &TlsAcceptor,
    mut stream: TcpStream,
) -> io::Result<Option<TlsStream<TcpStream>>> {
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await? == 1 && first[0] != 0x16 {
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
