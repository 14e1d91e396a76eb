//! Listening sockets, one thread per connection, and clean shutdown.
//!
//! Threads, not an async runtime: every request ends in blocking positioned I/O on the
//! export, so a runtime would hand it to a blocking pool anyway; a thread per connection
//! plus a few workers per connection (see `transmission`) is simple and measured fast
//! enough (crates/nbd/benches/vs_nbdkit.sh).
//!
//! Resources are bounded: at most `max_connections` connections (more are refused at
//! accept), one thread each while idle, and extra workers drawn from one budget shared by
//! every connection, so the thread count stays below `max_connections + max_extra_workers`
//! plus a few, whatever clients do.

use std::collections::HashMap;
use std::io::{self, BufReader};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::export::{ExportSet, RequestObserver};
use crate::handshake::{self, HandshakeEnd, Offer};
use crate::stream::Stream;
use crate::tls::{TlsPolicy, TlsStream};
use crate::transmission::{self, Context};

/// The NBD port clients assume when none is given.
pub const DEFAULT_TCP_PORT: u16 = 10809;
/// Largest READ or WRITE payload accepted, advertised as the maximum block size: the
/// 32 MiB the protocol recommends clients stay within for interoperability.
pub const DEFAULT_MAX_PAYLOAD_BYTES: u32 = 32 * 1024 * 1024;
/// Largest READ or WRITE accepted, well past what clients send (qemu stays within 32 MiB,
/// nbd-tester-client's huge-request test sends 48 MiB). Payloads past a few MiB are
/// streamed in pieces (see `transmission`), so memory stays bounded whatever the size.
pub const DEFAULT_MAX_REQUEST_BYTES: u32 = 1 << 30;
/// Requests of one connection served at once (nbdkit's default thread count).
pub const DEFAULT_WORKERS_PER_CONNECTION: usize = 16;
/// Connections served at once; more are refused.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// Worker threads beyond each connection's first, shared by all connections.
pub const DEFAULT_MAX_EXTRA_WORKERS: usize = 128;
/// Mode of the Unix socket file: the owner only.
pub const DEFAULT_SOCKET_MODE: u32 = 0o600;

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
    /// Most requests of one connection in flight at once.
    pub workers_per_connection: usize,
    /// Maximum payload advertised to clients (`NBD_INFO_BLOCK_SIZE`).
    pub max_payload_bytes: u32,
    /// Largest READ or WRITE accepted (larger: `EOVERFLOW`).
    pub max_request_bytes: u32,
    /// Connections served at once; one more is closed right after accept, with a log line.
    pub max_connections: usize,
    /// Worker threads beyond each connection's first, shared by all connections.
    pub max_extra_workers: usize,
    /// Mode of a Unix socket file, whatever the umask (0600 by default).
    pub socket_mode: u32,
    pub tls: TlsPolicy,
    pub observer: Option<Arc<dyn RequestObserver>>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            workers_per_connection: DEFAULT_WORKERS_PER_CONNECTION,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_extra_workers: DEFAULT_MAX_EXTRA_WORKERS,
            socket_mode: DEFAULT_SOCKET_MODE,
            tls: TlsPolicy::Off,
            observer: None,
        }
    }
}

impl ServerConfig {
    fn offer(&self) -> Offer {
        Offer {
            advertised_payload_bytes: self.max_payload_bytes,
            max_request_bytes: self.max_request_bytes,
            tls: self.tls.clone(),
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
    offer: Offer,
    epoch: Instant,
    stopping: AtomicBool,
    next_id: AtomicU64,
    refused: AtomicU64,
    /// Extra worker threads still available to connections.
    worker_budget: AtomicUsize,
    live: Mutex<HashMap<u64, Live>>,
}

/// A listening socket not yet serving: bind it first, so that a caller can find out that
/// it cannot listen before it touches anything else (an image, say). Dropping it unused
/// removes its Unix socket file.
pub struct Bound {
    listener: Option<Listener>,
    endpoint: Listen,
}

/// A bound, not yet serving, server.
pub struct Server {
    listener: Arc<Listener>,
    endpoint: Listen,
    shared: Arc<Shared>,
}

impl Bound {
    /// Binds `listen`. A Unix socket path left behind by a dead server is replaced; one a
    /// live server still answers on is an error. The socket file gets `socket_mode`
    /// whatever the umask.
    pub fn bind(listen: &Listen, socket_mode: u32) -> io::Result<Bound> {
        let (listener, endpoint) = match listen {
            Listen::Unix(path) => {
                remove_stale_socket(path)?;
                let l = bind_unix(path, socket_mode).map_err(|e| annotate(e, &path.display()))?;
                (Listener::Unix(l), listen.clone())
            }
            Listen::Tcp(addr) => {
                let l = TcpListener::bind(addr).map_err(|e| annotate(e, addr))?;
                let bound = l.local_addr()?;
                (Listener::Tcp(l), Listen::Tcp(bound))
            }
        };
        Ok(Bound {
            listener: Some(listener),
            endpoint,
        })
    }

    /// The bound endpoint (with the real port when port 0 was asked for).
    pub fn endpoint(&self) -> &Listen {
        &self.endpoint
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        if let (Some(_), Listen::Unix(p)) = (&self.listener, &self.endpoint) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Binds a Unix socket whose file has exactly `mode`, whatever the umask. The mode is set
/// on the socket before bind (Linux gives the file the socket's mode minus the umask, so
/// it is never more open than asked for, not even for a moment), then set exactly.
pub fn bind_unix(path: &Path, mode: u32) -> io::Result<UnixListener> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::FromRawFd;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: a zeroed sockaddr_un is valid; the path is copied in bounds below.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("socket path longer than {} bytes", addr.sun_path.len() - 1),
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: plain socket calls on a descriptor owned by `listener` from creation on.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let listener = UnixListener::from_raw_fd(fd);
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        let ok = libc::fchmod(fd, mode as libc::mode_t) == 0
            && libc::bind(fd, std::ptr::addr_of!(addr).cast(), len) == 0
            && libc::listen(fd, 128) == 0;
        if !ok {
            return Err(io::Error::last_os_error());
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        Ok(listener)
    }
}

/// A serving server; [`RunningServer::shutdown`] stops it cleanly.
pub struct RunningServer {
    listener: Arc<Listener>,
    endpoint: Listen,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds the listening socket (see [`Bound::bind`]) for these exports.
    pub fn bind(listen: &Listen, exports: ExportSet, config: ServerConfig) -> io::Result<Server> {
        let bound = Bound::bind(listen, config.socket_mode)?;
        Server::on(bound, exports, config)
    }

    /// A server on an already bound socket.
    pub fn on(mut bound: Bound, exports: ExportSet, config: ServerConfig) -> io::Result<Server> {
        if exports.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no export to serve",
            ));
        }
        let listener = bound.listener.take().expect("a Bound holds its listener");
        let shared = Arc::new(Shared {
            exports,
            offer: config.offer(),
            worker_budget: AtomicUsize::new(config.max_extra_workers),
            config,
            epoch: Instant::now(),
            stopping: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            refused: AtomicU64::new(0),
            live: Mutex::new(HashMap::new()),
        });
        Ok(Server {
            listener: Arc::new(listener),
            endpoint: bound.endpoint.clone(),
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
    let mut live = shared.live.lock().unwrap_or_else(|p| p.into_inner());
    live.retain(|_, (_, h)| !h.is_finished());
    if live.len() >= shared.config.max_connections {
        drop(live);
        return refuse(&stream, shared);
    }
    let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
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

/// Closes a connection past the limit. The protocol has no way to refuse before the
/// handshake, so the client sees the connection close; the log says why (the first
/// refusal of a burst and then every 100th, so a flood cannot flood the log too).
fn refuse(stream: &Stream, shared: &Shared) {
    let n = shared.refused.fetch_add(1, Ordering::Relaxed);
    if n.is_multiple_of(100) {
        tracing::warn!(
            "nbd: refused a connection: {} connections are being served (the maximum; \
             see --max-connections); {} refused so far",
            shared.config.max_connections,
            n + 1
        );
    }
    let _ = stream.shutdown(Shutdown::Both);
}

fn serve_connection(stream: &Arc<Stream>, id: u64, shared: &Shared) {
    let mut reader = BufReader::with_capacity(64 * 1024, &**stream);
    let mut writer = &**stream;
    match handshake::negotiate_offer(&mut reader, &mut writer, &shared.exports, &shared.offer) {
        Ok(HandshakeEnd::StartTls(resume)) if !reader.buffer().is_empty() => {
            // Plain bytes sent after STARTTLS, before the TLS handshake: an injection attempt.
            let _ = resume;
            tracing::info!("nbd: connection {id} dropped: data sent between STARTTLS and TLS");
        }
        Ok(HandshakeEnd::StartTls(resume)) => serve_tls(stream, id, shared, resume),
        end => finish_handshake(end, reader, writer, id, shared),
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// Wraps the connection in TLS after `STARTTLS` and goes on from there.
fn serve_tls(raw: &Arc<Stream>, id: u64, shared: &Shared, resume: handshake::Resume) {
    let Some(config) = shared.offer.tls.config() else {
        return; // STARTTLS is acknowledged only when TLS is configured.
    };
    let tls = match TlsStream::accept(Arc::clone(raw), Arc::clone(config)) {
        Ok(t) => Stream::Tls(Box::new(t)),
        Err(e) => return tracing::warn!("nbd: connection {id}: cannot start TLS: {e}"),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, &tls);
    let mut writer = &tls;
    let end = handshake::resume_after_tls(
        &mut reader,
        &mut writer,
        &shared.exports,
        &shared.offer,
        resume,
    );
    finish_handshake(end, reader, writer, id, shared);
}

/// Serves the transmission phase once the handshake picked an export, or logs why not.
fn finish_handshake(
    end: io::Result<HandshakeEnd>,
    reader: BufReader<&Stream>,
    writer: &Stream,
    id: u64,
    shared: &Shared,
) {
    let config = &shared.config;
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
                worker_budget: &shared.worker_budget,
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
        Ok(HandshakeEnd::StartTls(_)) => {
            tracing::info!("nbd: connection {id} dropped: STARTTLS inside TLS")
        }
        Err(e) => tracing::debug!("nbd: connection {id} handshake ended: {e}"),
    }
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
