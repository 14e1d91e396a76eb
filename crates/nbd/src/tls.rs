//! TLS for NBD connections (the protocol's `NBD_OPT_STARTTLS`), with rustls.
//!
//! A connection's workers read and write one socket from several threads at once (see
//! `transmission`), so the TLS session sits behind a lock that is never held while a
//! thread blocks on the socket: a reader takes ciphertext off the socket unlocked and
//! hands it to the session under the lock; a writer encrypts under the lock and sends
//! under a separate send lock that keeps the records in the order they were sealed.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::stream::Stream;

/// When the server offers or demands TLS (nbdkit's `--tls` values).
#[derive(Clone, Default)]
pub enum TlsPolicy {
    /// No TLS: `STARTTLS` is answered "unsupported".
    #[default]
    Off,
    /// TLS offered; clients may also go on in plain text.
    On(Arc<rustls::ServerConfig>),
    /// Every option but `STARTTLS` and `ABORT` is refused until TLS is up.
    Require(Arc<rustls::ServerConfig>),
}

impl TlsPolicy {
    pub(crate) fn config(&self) -> Option<&Arc<rustls::ServerConfig>> {
        match self {
            TlsPolicy::Off => None,
            TlsPolicy::On(c) | TlsPolicy::Require(c) => Some(c),
        }
    }

    pub fn required(&self) -> bool {
        matches!(self, TlsPolicy::Require(_))
    }
}

/// Why a certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: no PEM certificate in it (expected a -----BEGIN CERTIFICATE----- block)")]
    NoCertificate { path: PathBuf },
    #[error("{path}: not a PEM private key (PKCS#8, PKCS#1 or SEC1): {why}")]
    Key { path: PathBuf, why: String },
    #[error("{cert} and {key}: cannot serve with them: {why}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        why: String,
    },
}

/// Loads a PEM certificate chain and its private key into a server configuration.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsSetupError> {
    let read = |p: &Path| {
        File::open(p)
            .map(BufReader::new)
            .map_err(|source| TlsSetupError::Read {
                path: p.to_owned(),
                source,
            })
    };
    let mut certs = Vec::new();
    for c in CertificateDer::pem_reader_iter(read(cert)?) {
        certs.push(c.map_err(|e| TlsSetupError::Key {
            path: cert.to_owned(),
            why: e.to_string(),
        })?);
    }
    if certs.is_empty() {
        return Err(TlsSetupError::NoCertificate {
            path: cert.to_owned(),
        });
    }
    let key_der = PrivateKeyDer::from_pem_reader(read(key)?).map_err(|e| TlsSetupError::Key {
        path: key.to_owned(),
        why: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mismatch = |why: String| TlsSetupError::Mismatch {
        cert: cert.to_owned(),
        key: key.to_owned(),
        why,
    };
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| mismatch(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| mismatch(e.to_string()))?;
    Ok(Arc::new(config))
}

struct Session {
    conn: rustls::ServerConnection,
    /// Ciphertext read off the socket that the session has not taken yet.
    inbox: Vec<u8>,
}

/// A TLS session over a connected socket, readable and writable through shared references.
pub(crate) struct TlsStream {
    raw: Arc<Stream>,
    session: Mutex<Session>,
    send: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn invalid(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

impl TlsStream {
    /// Starts the server side of a TLS handshake; it proceeds as the stream is read.
    pub(crate) fn accept(
        raw: Arc<Stream>,
        config: Arc<rustls::ServerConfig>,
    ) -> io::Result<TlsStream> {
        let conn = rustls::ServerConnection::new(config).map_err(invalid)?;
        Ok(TlsStream {
            raw,
            session: Mutex::new(Session {
                conn,
                inbox: Vec::new(),
            }),
            send: Mutex::new(()),
        })
    }

    pub(crate) fn raw(&self) -> &Stream {
        &self.raw
    }

    /// Sends whatever the session has queued (handshake messages, alerts, tickets).
    fn send_pending(&self) -> io::Result<()> {
        let _order = lock(&self.send);
        let mut out = Vec::new();
        {
            let mut s = lock(&self.session);
            while s.conn.wants_write() {
                s.conn.write_tls(&mut out)?;
            }
        }
        (&*self.raw).write_all(&out)
    }

    /// Hands buffered ciphertext to the session; false when none was buffered.
    fn feed(&self) -> io::Result<bool> {
        let mut s = lock(&self.session);
        if s.inbox.is_empty() {
            return Ok(false);
        }
        let Session { conn, inbox } = &mut *s;
        let taken = conn.read_tls(&mut &inbox[..])?;
        inbox.drain(..taken);
        let processed = conn.process_new_packets();
        drop(s);
        // A failed session has queued an alert for the peer: send it, then fail.
        self.send_pending()?;
        processed.map(drop).map_err(invalid)?;
        Ok(true)
    }
}

impl Read for &TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut raw = [0u8; 16 * 1024];
        loop {
            match lock(&self.session).conn.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            if self.feed()? {
                continue;
            }
            let n = (&*self.raw).read(&mut raw)?;
            let mut s = lock(&self.session);
            if n == 0 {
                // The peer closed: the session reports a clean or an unclean end.
                s.conn.read_tls(&mut &[][..])?;
                continue;
            }
            s.inbox.extend_from_slice(&raw[..n]);
        }
    }
}

impl Write for &TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _order = lock(&self.send);
        let mut out = Vec::with_capacity(buf.len() + 256);
        let n = {
            let mut s = lock(&self.session);
            let n = s.conn.writer().write(buf)?;
            while s.conn.wants_write() {
                s.conn.write_tls(&mut out)?;
            }
            n
        };
        (&*self.raw).write_all(&out)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
