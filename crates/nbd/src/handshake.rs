//! The fixed newstyle handshake and option haggling, over any byte stream, so tests and
//! the fuzz target can drive it from memory.

use std::io::{self, Read, Write};
use std::sync::Arc;

use crate::export::{Export, ExportSet};
use crate::proto::{self, BlockSize, Negotiated};
use crate::tls::TlsPolicy;

/// Option data longer than this is discarded unread and refused with `NBD_REP_ERR_TOO_BIG`
/// (the longest legitimate option, `NBD_OPT_GO`, needs 4 + 4096 + 2 + a few info types).
pub const MAX_OPTION_BYTES: u32 = 16 * 1024;

/// What the client chose; the connection moves on to transmission with it.
#[derive(Clone)]
pub struct Session {
    pub name: String,
    pub export: Arc<dyn Export>,
    pub negotiated: Negotiated,
}

/// How the handshake ended.
pub enum HandshakeEnd {
    Transmission(Session),
    /// The client sent `NBD_OPT_ABORT` (and got its ACK).
    Aborted,
    /// The client broke a MUST of the protocol; the connection is dropped.
    Disconnected(String),
    /// `NBD_OPT_STARTTLS` was acknowledged: the caller wraps the stream in TLS and goes on
    /// with [`resume_after_tls`].
    StartTls(Resume),
}

/// Handshake state carried across the switch to TLS.
#[derive(Clone, Copy, Debug)]
pub struct Resume {
    no_zeroes: bool,
}

/// What the server offers beyond its exports.
#[derive(Clone, Default)]
pub struct Offer {
    /// Maximum payload advertised in `NBD_INFO_BLOCK_SIZE`.
    pub advertised_payload_bytes: u32,
    /// Largest READ or WRITE accepted (larger ones get `EOVERFLOW`); may exceed the
    /// advertised maximum, since the transmission phase streams large payloads.
    pub max_request_bytes: u32,
    pub tls: TlsPolicy,
}

impl Offer {
    /// No TLS; requests accepted up to the advertised maximum.
    pub fn plain(max_payload_bytes: u32) -> Offer {
        Offer {
            advertised_payload_bytes: max_payload_bytes,
            max_request_bytes: max_payload_bytes,
            tls: TlsPolicy::Off,
        }
    }
}

/// Runs the handshake without TLS: see [`negotiate_offer`].
pub fn negotiate<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    exports: &ExportSet,
    max_payload_bytes: u32,
) -> io::Result<HandshakeEnd> {
    negotiate_offer(r, w, exports, &Offer::plain(max_payload_bytes))
}

/// Runs the handshake: greeting, client flags, then options until the client picks an
/// export (`EXPORT_NAME` or `GO`), leaves, or starts TLS. Io errors (including the client
/// closing) are returned as `Err`.
pub fn negotiate_offer<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    exports: &ExportSet,
    offer: &Offer,
) -> io::Result<HandshakeEnd> {
    w.write_all(&proto::encode_greeting())?;
    w.flush()?;
    let mut flags = [0u8; 4];
    r.read_exact(&mut flags)?;
    let client = match proto::parse_client_flags(flags) {
        Ok(c) => c,
        Err(e) => return Ok(HandshakeEnd::Disconnected(e.to_string())),
    };
    let mut haggle = Haggle::new(exports, offer, client.no_zeroes, false);
    haggle_options(r, w, &mut haggle)
}

/// Goes on haggling over the TLS stream after `STARTTLS`. Options agreed before TLS are
/// forgotten, as the protocol asks (the client must send them again).
pub fn resume_after_tls<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    exports: &ExportSet,
    offer: &Offer,
    resume: Resume,
) -> io::Result<HandshakeEnd> {
    let mut haggle = Haggle::new(exports, offer, resume.no_zeroes, true);
    haggle_options(r, w, &mut haggle)
}

fn haggle_options<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    haggle: &mut Haggle<'_>,
) -> io::Result<HandshakeEnd> {
    loop {
        let mut hdr = [0u8; proto::OPTION_HEADER_BYTES];
        r.read_exact(&mut hdr)?;
        let h = match proto::parse_option_header(&hdr) {
            Ok(h) => h,
            Err(e) => return Ok(HandshakeEnd::Disconnected(e.to_string())),
        };
        if h.length > MAX_OPTION_BYTES {
            discard(r, h.length.into())?;
            if h.option == proto::OPT_EXPORT_NAME {
                return Ok(HandshakeEnd::Disconnected("export name too long".into()));
            }
            let msg = b"option data too long";
            w.write_all(&proto::encode_option_reply(
                h.option,
                proto::REP_ERR_TOO_BIG,
                msg,
            ))?;
            w.flush()?;
            continue;
        }
        let mut data = vec![0u8; h.length as usize];
        r.read_exact(&mut data)?;
        let (reply, end) = haggle.answer(h.option, &data);
        w.write_all(&reply)?;
        w.flush()?;
        if let Some(end) = end {
            return Ok(end);
        }
    }
}

/// Reads and drops `n` bytes in bounded pieces.
pub(crate) fn discard<R: Read>(r: &mut R, n: u64) -> io::Result<()> {
    let copied = io::copy(&mut r.take(n), &mut io::sink())?;
    if copied < n {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "peer closed mid-payload",
        ));
    }
    Ok(())
}

/// The transmission flags for an export, advertised truthfully: write commands only when
/// writable, multi-conn only when the export promises cross-connection flush, DF only
/// with structured replies (every read is answered with a single data chunk).
pub fn transmission_flags(export: &dyn Export, structured: bool) -> u16 {
    let mut f = proto::TX_HAS_FLAGS;
    if export.read_only() {
        f |= proto::TX_READ_ONLY;
    } else {
        f |= proto::TX_SEND_FLUSH
            | proto::TX_SEND_FUA
            | proto::TX_SEND_TRIM
            | proto::TX_SEND_WRITE_ZEROES;
    }
    if export.can_multi_conn() {
        f |= proto::TX_CAN_MULTI_CONN;
    }
    if structured {
        f |= proto::TX_SEND_DF;
    }
    f
}

/// Option haggling state.
struct Haggle<'a> {
    exports: &'a ExportSet,
    offer: &'a Offer,
    no_zeroes: bool,
    structured: bool,
    /// The export for which the client selected `base:allocation`, if any.
    allocation_for: Option<String>,
    /// The stream is inside TLS already.
    tls_up: bool,
}

impl<'a> Haggle<'a> {
    fn new(exports: &'a ExportSet, offer: &'a Offer, no_zeroes: bool, tls_up: bool) -> Self {
        Haggle {
            exports,
            offer,
            no_zeroes,
            structured: false,
            allocation_for: None,
            tls_up,
        }
    }

    /// `STARTTLS`: acknowledged when TLS is configured and not yet up.
    fn start_tls(&self, data: &[u8]) -> (Vec<u8>, Option<HandshakeEnd>) {
        let reply =
            |rep, msg: &str| proto::encode_option_reply(proto::OPT_STARTTLS, rep, msg.as_bytes());
        if self.offer.tls.config().is_none() {
            return (
                reply(proto::REP_ERR_UNSUP, "TLS is not enabled on this server"),
                None,
            );
        }
        if self.tls_up {
            return (reply(proto::REP_ERR_INVALID, "TLS is already in use"), None);
        }
        if !data.is_empty() {
            return (
                reply(proto::REP_ERR_INVALID, "STARTTLS takes no data"),
                None,
            );
        }
        let resume = Resume {
            no_zeroes: self.no_zeroes,
        };
        (
            reply(proto::REP_ACK, ""),
            Some(HandshakeEnd::StartTls(resume)),
        )
    }

    /// The bytes to send for one option, and whether the handshake ends with it.
    fn answer(&mut self, option: u32, data: &[u8]) -> (Vec<u8>, Option<HandshakeEnd>) {
        let err = |rep, msg: &str| {
            (
                proto::encode_option_reply(option, rep, msg.as_bytes()),
                None,
            )
        };
        let ack = || proto::encode_option_reply(option, proto::REP_ACK, &[]);
        let tls_needed = self.offer.tls.required() && !self.tls_up;
        if tls_needed && !matches!(option, proto::OPT_STARTTLS | proto::OPT_ABORT) {
            if option == proto::OPT_EXPORT_NAME {
                let why = "EXPORT_NAME before STARTTLS on a server that requires TLS";
                return (Vec::new(), Some(HandshakeEnd::Disconnected(why.into())));
            }
            return err(
                proto::REP_ERR_TLS_REQD,
                "this server requires TLS: send STARTTLS first",
            );
        }
        match option {
            proto::OPT_EXPORT_NAME => self.export_name(data),
            proto::OPT_ABORT => (ack(), Some(HandshakeEnd::Aborted)),
            proto::OPT_LIST if !data.is_empty() => {
                err(proto::REP_ERR_INVALID, "LIST takes no data")
            }
            proto::OPT_LIST => (self.list(), None),
            proto::OPT_STARTTLS => self.start_tls(data),
            proto::OPT_INFO | proto::OPT_GO => self.info(option, data),
            proto::OPT_STRUCTURED_REPLY if !data.is_empty() => {
                err(proto::REP_ERR_INVALID, "STRUCTURED_REPLY takes no data")
            }
            proto::OPT_STRUCTURED_REPLY => {
                self.structured = true;
                (ack(), None)
            }
            proto::OPT_LIST_META_CONTEXT | proto::OPT_SET_META_CONTEXT => {
                (self.meta_context(option, data), None)
            }
            _ => err(proto::REP_ERR_UNSUP, "option not supported"),
        }
    }

    fn session(&self, name: &str, export: &Arc<dyn Export>) -> Session {
        let negotiated = Negotiated {
            size_bytes: export.size_bytes(),
            tx_flags: transmission_flags(export.as_ref(), self.structured),
            structured: self.structured,
            max_payload_bytes: self.offer.max_request_bytes,
            block_status: self.structured && self.allocation_for.as_deref() == Some(name),
        };
        Session {
            name: name.to_owned(),
            export: Arc::clone(export),
            negotiated,
        }
    }

    /// `NBD_OPT_EXPORT_NAME` cannot answer with an error: an unknown name ends the session.
    fn export_name(&self, data: &[u8]) -> (Vec<u8>, Option<HandshakeEnd>) {
        let found = proto::parse_string(data)
            .ok()
            .and_then(|name| self.exports.find(name));
        let Some((name, export)) = found else {
            let why = format!("unknown export {:?}", String::from_utf8_lossy(data));
            return (Vec::new(), Some(HandshakeEnd::Disconnected(why)));
        };
        let s = self.session(name, export);
        let n = s.negotiated;
        let reply = proto::encode_export_name_reply(n.size_bytes, n.tx_flags, self.no_zeroes);
        (reply, Some(HandshakeEnd::Transmission(s)))
    }

    fn list(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, export) in self.exports.iter() {
            let entry = proto::encode_server_entry(name, &export.describe());
            out.extend(proto::encode_option_reply(
                proto::OPT_LIST,
                proto::REP_SERVER,
                &entry,
            ));
        }
        out.extend(proto::encode_option_reply(
            proto::OPT_LIST,
            proto::REP_ACK,
            &[],
        ));
        out
    }

    /// `NBD_OPT_INFO` and `NBD_OPT_GO`: `NBD_INFO_EXPORT` always, then each info type the
    /// client asked for that we know (once each), then ACK; GO then enters transmission.
    fn info(&self, option: u32, data: &[u8]) -> (Vec<u8>, Option<HandshakeEnd>) {
        let req = match proto::parse_info_request(data) {
            Ok(r) => r,
            Err(why) => {
                return (
                    proto::encode_option_reply(option, proto::REP_ERR_INVALID, why.as_bytes()),
                    None,
                )
            }
        };
        let Some((name, export)) = self.exports.find(req.name) else {
            let msg = format!("unknown export {:?}", req.name);
            return (
                proto::encode_option_reply(option, proto::REP_ERR_UNKNOWN, msg.as_bytes()),
                None,
            );
        };
        let s = self.session(name, export);
        let mut infos = vec![proto::encode_info_export(
            s.negotiated.size_bytes,
            s.negotiated.tx_flags,
        )];
        let mut seen = Vec::new();
        for info in req
            .infos
            .iter()
            .copied()
            .filter(|i| *i != proto::INFO_EXPORT)
        {
            if seen.contains(&info) {
                continue;
            }
            seen.push(info);
            match info {
                proto::INFO_NAME => infos.push(proto::encode_info_string(info, name)),
                proto::INFO_DESCRIPTION => {
                    infos.push(proto::encode_info_string(info, &export.describe()))
                }
                proto::INFO_BLOCK_SIZE => {
                    infos.push(proto::encode_info_block_size(self.block_size(export)))
                }
                _ => {} // Unknown info types are ignored, as the protocol allows.
            }
        }
        let mut out = Vec::new();
        for i in &infos {
            out.extend(proto::encode_option_reply(option, proto::REP_INFO, i));
        }
        out.extend(proto::encode_option_reply(option, proto::REP_ACK, &[]));
        let end = (option == proto::OPT_GO).then_some(HandshakeEnd::Transmission(s));
        (out, end)
    }

    /// `NBD_OPT_LIST_META_CONTEXT` and `NBD_OPT_SET_META_CONTEXT`: the one context served
    /// is `base:allocation` (id 1). LIST with no query, or a `base:` query, lists it; SET
    /// selects it when asked by name (unknown names are skipped, as the protocol says) and
    /// replaces any earlier selection. SET needs structured replies first.
    fn meta_context(&mut self, option: u32, data: &[u8]) -> Vec<u8> {
        let err = |rep, msg: &str| proto::encode_option_reply(option, rep, msg.as_bytes());
        let set = option == proto::OPT_SET_META_CONTEXT;
        if set && !self.structured {
            return err(
                proto::REP_ERR_INVALID,
                "SET_META_CONTEXT needs STRUCTURED_REPLY first",
            );
        }
        let (name, queries) = match proto::parse_meta_context_request(data) {
            Ok(r) => r,
            Err(why) => return err(proto::REP_ERR_INVALID, why),
        };
        let Some((name, _)) = self.exports.find(name) else {
            return err(proto::REP_ERR_UNKNOWN, &format!("unknown export {name:?}"));
        };
        let alloc = proto::META_BASE_ALLOCATION;
        let wanted = if set {
            queries.contains(&alloc)
        } else {
            queries.is_empty() || queries.iter().any(|q| *q == "base:" || *q == alloc)
        };
        if set {
            self.allocation_for = wanted.then(|| name.to_owned());
        }
        let mut out = Vec::new();
        if wanted {
            let id = proto::META_BASE_ALLOCATION_ID;
            out.extend(proto::encode_meta_context_reply(option, id, alloc));
        }
        out.extend(proto::encode_option_reply(option, proto::REP_ACK, &[]));
        out
    }

    fn block_size(&self, export: &Arc<dyn Export>) -> BlockSize {
        BlockSize {
            minimum_bytes: 1,
            preferred_bytes: export
                .preferred_block_bytes()
                .min(self.offer.advertised_payload_bytes),
            maximum_bytes: self.offer.advertised_payload_bytes,
        }
    }
}
