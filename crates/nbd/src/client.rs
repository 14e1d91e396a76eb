//! A small NBD client: fixed-newstyle handshake with `NBD_OPT_GO`, then simple replies
//! (no structured replies are asked for), pipelined. Made for `reblock replay`, which
//! sends a trace's reads and writes to any NBD export (this server, nbdkit, qemu-nbd).
//!
//! The connection splits into a [`Sender`] and a [`Receiver`] so that one thread can keep
//! requests in flight while another collects replies.

use crate::proto::{
    encode_request_header, RequestHeader, CLIENT_FIXED_NEWSTYLE, CLIENT_NO_ZEROES, CMD_DISC,
    CMD_FLUSH, CMD_READ, CMD_WRITE, FLAG_FIXED_NEWSTYLE, FLAG_NO_ZEROES, IHAVEOPT, INFO_EXPORT,
    NBD_MAGIC, OPTION_REPLY_MAGIC, OPT_GO, REP_ACK, REP_INFO, SIMPLE_REPLY_MAGIC, TX_READ_ONLY,
};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Why a connection could not be set up or a reply not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("not an NBD server: {0}")]
    NotNbd(String),
    #[error("the server does not speak fixed newstyle negotiation")]
    OldStyle,
    #[error("the server refused export {export:?} (reply {reply:#x}): {message}")]
    Refused {
        export: String,
        reply: u32,
        message: String,
    },
    #[error("protocol error: {0}")]
    Protocol(String),
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> ClientError {
    move |source| ClientError::Io { what, source }
}

/// What the handshake agreed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportInfo {
    pub size_bytes: u64,
    pub tx_flags: u16,
}

impl ExportInfo {
    pub fn read_only(&self) -> bool {
        self.tx_flags & TX_READ_ONLY != 0
    }
}

/// The request kinds the client sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Read,
    Write,
    Flush,
}

/// The sending half of a connection.
pub struct Sender {
    w: Box<dyn Write + Send>,
}

/// The receiving half of a connection.
pub struct Receiver {
    r: Box<dyn Read + Send>,
}

/// One simple reply: the request's cookie and errno (0: success).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    pub cookie: u64,
    pub errno: u32,
}

/// Connects to a Unix socket and opens `export` ("" for the server's default).
pub fn connect_unix(
    path: &Path,
    export: &str,
) -> Result<(ExportInfo, Sender, Receiver), ClientError> {
    let s = UnixStream::connect(path).map_err(io_err("connect"))?;
    let r = s.try_clone().map_err(io_err("connect"))?;
    open(Box::new(r), Box::new(s), export)
}

/// Connects over TCP to `addr` (HOST:PORT) and opens `export`.
pub fn connect_tcp(
    addr: &str,
    export: &str,
) -> Result<(ExportInfo, Sender, Receiver), ClientError> {
    let s = TcpStream::connect(addr).map_err(io_err("connect"))?;
    s.set_nodelay(true).map_err(io_err("connect"))?;
    let r = s.try_clone().map_err(io_err("connect"))?;
    open(Box::new(r), Box::new(s), export)
}

fn read_array<const N: usize>(
    r: &mut dyn Read,
    what: &'static str,
) -> Result<[u8; N], ClientError> {
    let mut b = [0u8; N];
    r.read_exact(&mut b).map_err(io_err(what))?;
    Ok(b)
}

/// The handshake: greeting, client flags, `NBD_OPT_GO` for `export`.
fn open(
    mut r: Box<dyn Read + Send>,
    mut w: Box<dyn Write + Send>,
    export: &str,
) -> Result<(ExportInfo, Sender, Receiver), ClientError> {
    let g: [u8; 18] = read_array(&mut r, "read the greeting")?;
    if u64::from_be_bytes(g[..8].try_into().expect("8 bytes")) != NBD_MAGIC {
        return Err(ClientError::NotNbd(format!(
            "greeting starts {:?}",
            String::from_utf8_lossy(&g[..8])
        )));
    }
    if u64::from_be_bytes(g[8..16].try_into().expect("8 bytes")) != IHAVEOPT {
        return Err(ClientError::OldStyle);
    }
    let server_flags = u16::from_be_bytes([g[16], g[17]]);
    if server_flags & FLAG_FIXED_NEWSTYLE == 0 {
        return Err(ClientError::OldStyle);
    }
    let mut flags = CLIENT_FIXED_NEWSTYLE;
    if server_flags & FLAG_NO_ZEROES != 0 {
        flags |= CLIENT_NO_ZEROES;
    }
    let mut opt = Vec::with_capacity(32 + export.len());
    opt.extend_from_slice(&flags.to_be_bytes());
    opt.extend_from_slice(&IHAVEOPT.to_be_bytes());
    opt.extend_from_slice(&OPT_GO.to_be_bytes());
    opt.extend_from_slice(&(export.len() as u32 + 6).to_be_bytes());
    opt.extend_from_slice(&(export.len() as u32).to_be_bytes());
    opt.extend_from_slice(export.as_bytes());
    opt.extend_from_slice(&0u16.to_be_bytes());
    w.write_all(&opt).map_err(io_err("send NBD_OPT_GO"))?;
    w.flush().map_err(io_err("send NBD_OPT_GO"))?;
    let info = go_replies(&mut r, export)?;
    Ok((info, Sender { w }, Receiver { r }))
}

/// Reads option replies up to the final ACK; the export's size and flags come in an
/// `NBD_INFO_EXPORT` reply before it.
fn go_replies(r: &mut dyn Read, export: &str) -> Result<ExportInfo, ClientError> {
    let mut info = None;
    loop {
        let h: [u8; 20] = read_array(r, "read an option reply")?;
        if u64::from_be_bytes(h[..8].try_into().expect("8 bytes")) != OPTION_REPLY_MAGIC {
            return Err(ClientError::Protocol("bad option reply magic".into()));
        }
        let reply = u32::from_be_bytes(h[12..16].try_into().expect("4 bytes"));
        let len = u32::from_be_bytes(h[16..20].try_into().expect("4 bytes")) as usize;
        if len > 1 << 20 {
            return Err(ClientError::Protocol(format!(
                "option reply of {len} bytes"
            )));
        }
        let mut data = vec![0u8; len];
        r.read_exact(&mut data)
            .map_err(io_err("read an option reply"))?;
        match reply {
            REP_ACK => {
                return info.ok_or_else(|| {
                    ClientError::Protocol(
                        "NBD_OPT_GO acknowledged without the export's size".into(),
                    )
                })
            }
            REP_INFO
                if data.len() >= 12 && u16::from_be_bytes([data[0], data[1]]) == INFO_EXPORT =>
            {
                info = Some(ExportInfo {
                    size_bytes: u64::from_be_bytes(data[2..10].try_into().expect("8 bytes")),
                    tx_flags: u16::from_be_bytes([data[10], data[11]]),
                });
            }
            REP_INFO => {}
            e if e & 0x8000_0000 != 0 => {
                return Err(ClientError::Refused {
                    export: export.to_string(),
                    reply: e,
                    message: String::from_utf8_lossy(&data).into_owned(),
                })
            }
            other => {
                return Err(ClientError::Protocol(format!(
                    "unexpected option reply {other:#x}"
                )))
            }
        }
    }
}

impl Sender {
    /// Sends one request; `data` is the payload of a write (its length is the request's).
    pub fn send(
        &mut self,
        cookie: u64,
        cmd: Command,
        offset: u64,
        length: u32,
        data: &[u8],
    ) -> io::Result<()> {
        let kind = match cmd {
            Command::Read => CMD_READ,
            Command::Write => CMD_WRITE,
            Command::Flush => CMD_FLUSH,
        };
        let h = encode_request_header(&RequestHeader {
            flags: 0,
            kind,
            cookie,
            offset,
            length,
        });
        self.w.write_all(&h)?;
        if cmd == Command::Write {
            self.w.write_all(&data[..length as usize])?;
        }
        self.w.flush()
    }

    /// Says goodbye (`NBD_CMD_DISC`); the server closes the connection.
    pub fn disconnect(mut self) -> io::Result<()> {
        let h = encode_request_header(&RequestHeader {
            flags: 0,
            kind: CMD_DISC,
            cookie: 0,
            offset: 0,
            length: 0,
        });
        self.w.write_all(&h)?;
        self.w.flush()
    }
}

impl Receiver {
    /// Reads one simple reply. `read_len` gives the payload length of the request with
    /// that cookie when it was a read (`None` otherwise); a successful read's data is
    /// read into `buf` (grown as needed).
    pub fn recv(
        &mut self,
        read_len: impl FnOnce(u64) -> Option<u32>,
        buf: &mut Vec<u8>,
    ) -> Result<Reply, ClientError> {
        let h: [u8; 16] = read_array(&mut self.r, "read a reply")?;
        let magic = u32::from_be_bytes(h[..4].try_into().expect("4 bytes"));
        if magic != SIMPLE_REPLY_MAGIC {
            return Err(ClientError::Protocol(format!(
                "reply magic {magic:#x} (a structured reply that was not asked for?)"
            )));
        }
        let errno = u32::from_be_bytes(h[4..8].try_into().expect("4 bytes"));
        let cookie = u64::from_be_bytes(h[8..16].try_into().expect("8 bytes"));
        if let (0, Some(n)) = (errno, read_len(cookie)) {
            buf.resize(n as usize, 0);
            self.r
                .read_exact(buf)
                .map_err(io_err("read a reply's data"))?;
        }
        Ok(Reply { cookie, errno })
    }
}
