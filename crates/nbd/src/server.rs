//! Listening sockets, one thread per connection, and clean shutdown.
//!
//! Threads, not an async runtime: every request ends in blocking positioned I/O on the
//! export, so a runtime would hand it to a blocking pool anyway; a thread per connection
//! plus a few workers per connection (see `transmission`) is simple and measured fast
//! enough (crates/nbd/benches/vs_nbdkit.sh).

use std::collections::HashMap;
use std::io::{self, BufReader};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::export::{ExportSet, RequestObserver};
use crate::handshake::{self, HandshakeEnd};
use crate::stream::Stream;
use crate::transmission::{self, Context};

/// The NBD port clients assume when none is given.
pub const DEFAULT_TCP_PORT: u16 = 10809;
/// Largest READ or WRITE payload accepted, advertised as the maximum block size: the
/// 32 MiB the protocol recommends clients stay within for interoperability.
pub const DEFAULT_MAX_PAYLOAD_BYTES: u32 = 32 * 1024 * 1024;
/// Requests of one connection served at once (nbdkit's default thread count).
pub const DEFAULT_WORKERS_PER_CONNECTION: usize = 16;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    /// Exactly this address; use [`Listen::tcp_loopback`] unless the caller explicitly
    /// asked to be reachable from elsewhere.
    Tcp(SocketAddr),
}

impl Listen {
    /// TCP on 127.0.0.1 (port 0 picks a free port).
    pub fn tcp_loopback(port: u16) -> Listen {
        Listen::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
    }

    /// The NBD URI clients (nbdinfo, qemu, nbdcopy) accept for this endpoint.
    pub fn uri(&self, export: &str) -> String {
        match self {
            Listen::Unix(p) => format!("nbd+unix:///{export}?socket={}", p.display()),
            Listen::Tcp(a) => format!("nbd://{a}/{export}"),
        }
    }
}

/// Server tuning; the defaults suit real clients.
#[derive(Clone)]
pub struct ServerConfig {
    pub workers_per_connection: usize,
    pub max_payload_bytes: u32,
    pub observer: Option<Arc<dyn RequestObserver>>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            workers_per_connection: DEFAULT_WORKERS_PER_CONNECTION,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            observer: None,
        }
    }
}

enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

/// A connection being served: its socket (to shut it down) and its thread.
type Live = (Arc<Stream>, JoinHandle<()>);

/// State shared by the accept thread, the connections and the handle.
struct Shared {
    exports: ExportSet,
    config: ServerConfig,
    epoch: Instant,
    stopping: AtomicBool,
    next_id: AtomicU64,
    live: Mutex<HashMap<u64, Live>>,
}

/// A bound, not yet serving, server.
pub struct Server {
    listener: Arc<Listener>,
    endpoint: Listen,
    shared: Arc<Shared>,
}

/// A serving server; [`RunningServer::shutdown`] stops it cleanly.
pub struct RunningServer {
    listener: Arc<Listener>,
    endpoint: Listen,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds the listening socket. A Unix socket path left behind by a dead server is
    /// replaced; one a live server still answers on is an error.
    pub fn bind(listen: &Listen, exports: ExportSet, config: ServerConfig) -> io::Result<Server> {
        if exports.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no export to serve",
            ));
        }
        let (listener, endpoint) = match listen {
            Listen::Unix(path) => {
                remove_stale_socket(path)?;
                let l = UnixListener::bind(path).map_err(|e| annotate(e, &path.display()))?;
                (Listener::Unix(l), listen.clone())
            }
            Listen::Tcp(addr) => {
                let l = TcpListener::bind(addr).map_err(|e| annotate(e, addr))?;
                let bound = l.local_addr()?;
                (Listener::Tcp(l), Listen::Tcp(bound))
            }
        };
        let shared = Arc::new(Shared {
            exports,
            config,
            epoch: Instant::now(),
            stopping: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            live: Mutex::new(HashMap::new()),
        });
        Ok(Server {
            listener: Arc::new(listener),
            endpoint,
            shared,
        })
    }

    /// The bound endpoint (with the real port when port 0 was asked for).
    pub fn endpoint(&self) -> &Listen {
        &self.endpoint
    }

    /// The instant [`crate::RequestEvent::ts_ns`] counts from.
    pub fn epoch(&self) -> Instant {
        self.shared.epoch
    }

    /// Starts accepting on a background thread.
    pub fn start(self) -> io::Result<RunningServer> {
        let shared = Arc::clone(&self.shared);
        let listener = Arc::clone(&self.listener);
        let accept = std::thread::Builder::new()
            .name("nbd-accept".into())
            .spawn(move || accept_loop(&listener, &shared))?;
        Ok(RunningServer {
            listener: self.listener,
            endpoint: self.endpoint,
            shared: self.shared,
            accept: Some(accept),
        })
    }
}

fn annotate(e: io::Error, what: &dyn std::fmt::Display) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: cannot listen: {e}"))
}

fn remove_stale_socket(path: &Path) -> io::Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let in_use = || {
        io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{}: in use", path.display()),
        )
    };
    if !meta.file_type().is_socket() {
        return Err(in_use());
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(in_use()),
        Err(_) => std::fs::remove_file(path),
    }
}

fn accept_loop(listener: &Listener, shared: &Arc<Shared>) {
    loop {
        let accepted = match listener {
            Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| {
                // Replies are written whole; waiting to coalesce them only adds latency.
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
        };
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        match accepted {
            Ok(stream) => spawn_connection(Arc::new(stream), shared),
            Err(e) => {
                tracing::warn!("nbd: accept failed: {e}");
                // Out of descriptors and similar: back off instead of spinning.
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

fn spawn_connection(stream: Arc<Stream>, shared: &Arc<Shared>) {
    let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
    let mut live = shared.live.lock().unwrap_or_else(|p| p.into_inner());
    live.retain(|_, (_, h)| !h.is_finished());
    let (s2, sh2) = (Arc::clone(&stream), Arc::clone(shared));
    let spawned = std::thread::Builder::new()
        .name(format!("nbd-conn-{id}"))
        .spawn(move || serve_connection(&s2, id, &sh2));
    match spawned {
        Ok(handle) => {
            live.insert(id, (stream, handle));
        }
        Err(e) => tracing::warn!("nbd: cannot start connection {id}: {e}"),
    }
}

fn serve_connection(stream: &Stream, id: u64, shared: &Shared) {
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let mut writer = stream;
    let config = &shared.config;
    let end = handshake::negotiate(
        &mut reader,
        &mut writer,
        &shared.exports,
        config.max_payload_bytes,
    );
    match end {
        Ok(HandshakeEnd::Transmission(session)) => {
            tracing::debug!("nbd: connection {id} serves export {:?}", session.name);
            let ctx = Context {
                connection_id: id,
                export: session.export.as_ref(),
                negotiated: session.negotiated,
                observer: config.observer.as_deref(),
                epoch: shared.epoch,
                workers: config.workers_per_connection,
            };
            session.export.connection_changed(true);
            let ended = transmission::serve(reader, writer, &ctx);
            session.export.connection_changed(false);
            tracing::debug!("nbd: connection {id} ended: {ended:?}");
        }
        Ok(HandshakeEnd::Aborted) => tracing::debug!("nbd: connection {id} aborted"),
        Ok(HandshakeEnd::Disconnected(why)) => {
            tracing::info!("nbd: connection {id} dropped: {why}")
        }
        Err(e) => tracing::debug!("nbd: connection {id} handshake ended: {e}"),
    }
    let _ = stream.shutdown(Shutdown::Both);
}

impl RunningServer {
    pub fn endpoint(&self) -> &Listen {
        &self.endpoint
    }

    /// Connections accepted so far.
    pub fn connections_accepted(&self) -> u64 {
        self.shared.next_id.load(Ordering::SeqCst) - 1
    }

    /// Stops accepting, lets every connection finish the requests it has already read
    /// (their replies are sent), then closes them and removes the Unix socket.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept: shutting the listening socket down makes accept fail
        // on Linux; a connection of our own covers the rest (the socket path may be gone).
        let fd = match &*self.listener {
            Listener::Unix(l) => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
        };
        // SAFETY: the fd stays open: self.listener keeps the listener alive.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        let _ = match &self.endpoint {
            Listen::Unix(p) => UnixStream::connect(p).map(drop),
            Listen::Tcp(a) => TcpStream::connect(wake_addr(*a)).map(drop),
        };
        let _ = accept.join();
        let live: Vec<_> = {
            let mut map = self.shared.live.lock().unwrap_or_else(|p| p.into_inner());
            map.drain().map(|(_, v)| v).collect()
        };
        // Closing the read side ends each connection after its in-flight replies.
        for (stream, _) in &live {
            let _ = stream.shutdown(Shutdown::Read);
        }
        for (_, handle) in live {
            let _ = handle.join();
        }
        if let Listen::Unix(p) = &self.endpoint {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A listener on the unspecified address is reached through loopback.
fn wake_addr(a: SocketAddr) -> SocketAddr {
    if a.ip().is_unspecified() {
        let ip = match a {
            SocketAddr::V4(_) => std::net::IpAddr::V4(Ipv4Addr::LOCALHOST),
            SocketAddr::V6(_) => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        };
        SocketAddr::new(ip, a.port())
    } else {
        a
    }
}
