//! reblock-nbd: an NBD server (fixed newstyle handshake, structured replies, multi-conn,
//! TLS) over Unix and TCP sockets. The wire behaviour is documented in docs/nbd.md.
//!
//! The online engine implements [`Export`] and watches every served request through a
//! [`RequestObserver`]; [`FileExport`] serves a plain file or block device on its own:
//!
//! ```no_run
//! use std::sync::Arc;
//! use reblock_nbd::{ExportSet, FileExport, Listen, Server, ServerConfig};
//! let export = Arc::new(FileExport::open("disk.img".as_ref(), false)?);
//! let exports = ExportSet::single("disk", export)?;
//! let listen = Listen::Unix("/tmp/disk.sock".into());
//! let server = Server::bind(&listen, exports, ServerConfig::default())?.start()?;
//! // ... serve until told to stop ...
//! server.shutdown();
//! # Ok::<(), std::io::Error>(())
//! ```

pub mod client;
pub mod export;
pub mod file;
pub mod handshake;
pub mod memory;
pub mod proto;
pub mod server;
mod stream;
pub mod tls;
pub mod transmission;

pub use export::{nbd_errno, Export, ExportSet, Op, RequestEvent, RequestObserver};
pub use file::FileExport;
pub use memory::MemoryExport;
pub use server::{bind_unix, Bound, Listen, RunningServer, Server, ServerConfig};
pub use tls::{server_config as tls_server_config, TlsPolicy, TlsSetupError};
