//! The NBD wire format as pure functions over bytes: constants, parsers that never panic
//! on any input, and encoders. Nothing here does I/O, so a fuzz target can drive every
//! parser directly (docs/nbd.md lists the behaviour chosen where the protocol leaves a
//! choice). All integers on the wire are big-endian.

/// `NBDMAGIC`, the first 8 bytes the server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the newstyle magic, and the magic of every option request.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of every option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const CLIENT_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const CLIENT_NO_ZEROES: u32 = 1 << 1;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;

// Option replies.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
pub const REP_ERR_UNSUP: u32 = 0x8000_0001;
pub const REP_ERR_POLICY: u32 = 0x8000_0002;
pub const REP_ERR_INVALID: u32 = 0x8000_0003;
pub const REP_ERR_TLS_REQD: u32 = 0x8000_0005;
pub const REP_ERR_UNKNOWN: u32 = 0x8000_0006;
pub const REP_ERR_SHUTDOWN: u32 = 0x8000_0007;
pub const REP_ERR_TOO_BIG: u32 = 0x8000_0009;

// Info types (NBD_OPT_INFO / NBD_OPT_GO).
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Transmission flags.
pub const TX_HAS_FLAGS: u16 = 1 << 0;
pub const TX_READ_ONLY: u16 = 1 << 1;
pub const TX_SEND_FLUSH: u16 = 1 << 2;
pub const TX_SEND_FUA: u16 = 1 << 3;
pub const TX_SEND_TRIM: u16 = 1 << 5;
pub const TX_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TX_SEND_DF: u16 = 1 << 7;
pub const TX_CAN_MULTI_CONN: u16 = 1 << 8;

// Command flags.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;

// Commands.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;

// The one metadata context served: allocation, with its id and state bits.
pub const META_BASE_ALLOCATION: &str = "base:allocation";
pub const META_BASE_ALLOCATION_ID: u32 = 1;
/// `base:allocation`: the extent is not allocated (a hole).
pub const STATE_HOLE: u32 = 1 << 0;
/// `base:allocation`: the extent reads as zeros.
pub const STATE_ZERO: u32 = 1 << 1;

// Structured reply chunk flags and types.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = 0x8001;

// Error values: the protocol fixes these numbers independently of the host's errno.
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ESHUTDOWN: u32 = 108;

/// Longest string (export name, description) the protocol allows.
pub const MAX_STRING_BYTES: usize = 4096;
/// Bytes of a transmission request header.
pub const REQUEST_HEADER_BYTES: usize = 28;
/// Bytes of an option request header.
pub const OPTION_HEADER_BYTES: usize = 16;
/// Bytes of a simple reply header.
pub const SIMPLE_REPLY_BYTES: usize = 16;
/// Bytes of a structured reply chunk header.
pub const CHUNK_HEADER_BYTES: usize = 20;
/// Bytes before the data of an `OFFSET_DATA` chunk: chunk header plus the 64-bit offset.
pub const OFFSET_DATA_PREFIX_BYTES: usize = CHUNK_HEADER_BYTES + 8;

/// Why a peer's bytes cannot be accepted; every variant ends the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("bad magic {found:#x} (expected {expected:#x})")]
    BadMagic { expected: u64, found: u64 },
    #[error("client flags {0:#x} set bits the server did not offer")]
    UnknownClientFlags(u32),
}

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The 18 bytes the server opens with: `NBDMAGIC`, `IHAVEOPT`, handshake flags.
pub fn encode_greeting() -> [u8; 18] {
    let mut b = [0u8; 18];
    b[..8].copy_from_slice(&NBD_MAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    b[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    b
}

/// What the client answered to the greeting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientFlags {
    pub fixed_newstyle: bool,
    pub no_zeroes: bool,
}

/// Client flags: the protocol says the server MUST drop the connection on any bit it did
/// not offer.
pub fn parse_client_flags(b: [u8; 4]) -> Result<ClientFlags, ProtoError> {
    let flags = u32::from_be_bytes(b);
    if flags & !(CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES) != 0 {
        return Err(ProtoError::UnknownClientFlags(flags));
    }
    Ok(ClientFlags {
        fixed_newstyle: flags & CLIENT_FIXED_NEWSTYLE != 0,
        no_zeroes: flags & CLIENT_NO_ZEROES != 0,
    })
}

/// One option request header; `length` bytes of data follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    pub option: u32,
    pub length: u32,
}

pub fn parse_option_header(b: &[u8; OPTION_HEADER_BYTES]) -> Result<OptionHeader, ProtoError> {
    let magic = be_u64(b, 0);
    if magic != IHAVEOPT {
        return Err(ProtoError::BadMagic {
            expected: IHAVEOPT,
            found: magic,
        });
    }
    Ok(OptionHeader {
        option: be_u32(b, 8),
        length: be_u32(b, 12),
    })
}

/// A protocol string: UTF-8, no NUL, at most [`MAX_STRING_BYTES`].
pub fn parse_string(b: &[u8]) -> Result<&str, &'static str> {
    if b.len() > MAX_STRING_BYTES {
        return Err("string longer than 4096 bytes");
    }
    if b.contains(&0) {
        return Err("string contains NUL");
    }
    std::str::from_utf8(b).map_err(|_| "string is not UTF-8")
}

/// The data of `NBD_OPT_INFO` / `NBD_OPT_GO`: export name and the info types asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest<'a> {
    pub name: &'a str,
    pub infos: Vec<u16>,
}

/// Layout: u32 name length, name, u16 count, count x u16 info types; the lengths must
/// add up to the option length exactly.
pub fn parse_info_request(data: &[u8]) -> Result<InfoRequest<'_>, &'static str> {
    if data.len() < 6 {
        return Err("option data shorter than 6 bytes");
    }
    let name_len = be_u32(data, 0) as usize;
    let rest = &data[4..];
    if name_len > rest.len().saturating_sub(2) {
        return Err("export name length exceeds the option length");
    }
    let name = parse_string(&rest[..name_len])?;
    let rest = &rest[name_len..];
    let count = be_u16(rest, 0) as usize;
    let list = &rest[2..];
    if list.len() != count * 2 {
        return Err("number of info requests does not match the option length");
    }
    let infos = list.chunks_exact(2).map(|c| be_u16(c, 0)).collect();
    Ok(InfoRequest { name, infos })
}

/// One option reply: magic, option, reply type, length, data.
pub fn encode_option_reply(option: u32, reply: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&reply.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// `NBD_REP_SERVER` data: u32 name length, name, then a human-readable description.
pub fn encode_server_entry(name: &str, description: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + name.len() + description.len());
    b.extend_from_slice(&(name.len() as u32).to_be_bytes());
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(description.as_bytes());
    b
}

/// `NBD_INFO_EXPORT` data: type, u64 size, u16 transmission flags.
pub fn encode_info_export(size_bytes: u64, tx_flags: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(12);
    b.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    b.extend_from_slice(&size_bytes.to_be_bytes());
    b.extend_from_slice(&tx_flags.to_be_bytes());
    b
}

/// `NBD_INFO_NAME` / `NBD_INFO_DESCRIPTION` data: type then the string.
pub fn encode_info_string(info: u16, text: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(2 + text.len());
    b.extend_from_slice(&info.to_be_bytes());
    b.extend_from_slice(text.as_bytes());
    b
}

/// Block size constraints (minimum, preferred, maximum payload), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSize {
    pub minimum_bytes: u32,
    pub preferred_bytes: u32,
    pub maximum_bytes: u32,
}

pub fn encode_info_block_size(bs: BlockSize) -> Vec<u8> {
    let mut b = Vec::with_capacity(14);
    b.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    b.extend_from_slice(&bs.minimum_bytes.to_be_bytes());
    b.extend_from_slice(&bs.preferred_bytes.to_be_bytes());
    b.extend_from_slice(&bs.maximum_bytes.to_be_bytes());
    b
}

/// The answer to `NBD_OPT_EXPORT_NAME`: size, flags, and 124 zero bytes unless the client
/// agreed to `NO_ZEROES`.
pub fn encode_export_name_reply(size_bytes: u64, tx_flags: u16, no_zeroes: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(134);
    b.extend_from_slice(&size_bytes.to_be_bytes());
    b.extend_from_slice(&tx_flags.to_be_bytes());
    if !no_zeroes {
        b.extend_from_slice(&[0u8; 124]);
    }
    b
}

/// One transmission request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    pub flags: u16,
    pub kind: u16,
    pub cookie: u64,
    pub offset: u64,
    pub length: u32,
}

pub fn parse_request_header(b: &[u8; REQUEST_HEADER_BYTES]) -> Result<RequestHeader, ProtoError> {
    let magic = be_u32(b, 0);
    if magic != REQUEST_MAGIC {
        return Err(ProtoError::BadMagic {
            expected: REQUEST_MAGIC.into(),
            found: magic.into(),
        });
    }
    Ok(RequestHeader {
        flags: be_u16(b, 4),
        kind: be_u16(b, 6),
        cookie: be_u64(b, 8),
        offset: be_u64(b, 16),
        length: be_u32(b, 24),
    })
}

pub fn encode_request_header(h: &RequestHeader) -> [u8; REQUEST_HEADER_BYTES] {
    let mut b = [0u8; REQUEST_HEADER_BYTES];
    b[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&h.flags.to_be_bytes());
    b[6..8].copy_from_slice(&h.kind.to_be_bytes());
    b[8..16].copy_from_slice(&h.cookie.to_be_bytes());
    b[16..24].copy_from_slice(&h.offset.to_be_bytes());
    b[24..].copy_from_slice(&h.length.to_be_bytes());
    b
}

/// What was agreed in the handshake and bounds every request of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    pub size_bytes: u64,
    pub tx_flags: u16,
    pub structured: bool,
    pub max_payload_bytes: u32,
    /// The client selected `base:allocation` for this export: BLOCK_STATUS is allowed.
    pub block_status: bool,
}

impl Negotiated {
    pub fn read_only(&self) -> bool {
        self.tx_flags & TX_READ_ONLY != 0
    }
}

/// A request that passed every check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Read {
        offset: u64,
        length: u32,
    },
    Write {
        offset: u64,
        length: u32,
        fua: bool,
    },
    Flush,
    Trim {
        offset: u64,
        length: u32,
        fua: bool,
    },
    WriteZeroes {
        offset: u64,
        length: u32,
        fua: bool,
        may_trim: bool,
    },
    BlockStatus {
        offset: u64,
        length: u32,
        /// `REQ_ONE`: answer with a single extent.
        req_one: bool,
    },
    Disconnect,
}

/// A request refused with an error reply. `discard_bytes` of payload follow the header on
/// the wire and must be consumed before the next header (only `NBD_CMD_WRITE` has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejection {
    pub errno: u32,
    pub message: &'static str,
    pub discard_bytes: u32,
}

/// Checks one request against the negotiated state, in the order documented in
/// docs/nbd.md: command, flags, read-only, length, range.
pub fn check_request(h: &RequestHeader, n: &Negotiated) -> Result<Command, Rejection> {
    let payload = if h.kind == CMD_WRITE { h.length } else { 0 };
    let reject = |errno, message| Rejection {
        errno,
        message,
        discard_bytes: payload,
    };
    let writes = matches!(h.kind, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES);
    let allowed = allowed_flags(h.kind, n).ok_or(reject(EINVAL, "unknown command"))?;
    if h.flags & !allowed != 0 {
        return Err(reject(EINVAL, "command flag not valid for this command"));
    }
    if h.kind == CMD_DISC {
        return Ok(Command::Disconnect);
    }
    if h.kind == CMD_FLUSH {
        if h.offset != 0 || h.length != 0 {
            return Err(reject(EINVAL, "flush offset and length must be zero"));
        }
        return Ok(Command::Flush);
    }
    if writes && n.read_only() {
        return Err(reject(EPERM, "export is read-only"));
    }
    if h.length == 0 {
        return Err(reject(EINVAL, "zero-length request"));
    }
    if matches!(h.kind, CMD_READ | CMD_WRITE) && h.length > n.max_payload_bytes {
        return Err(reject(
            EOVERFLOW,
            "request exceeds the maximum payload size",
        ));
    }
    let in_range = h
        .offset
        .checked_add(h.length.into())
        .is_some_and(|end| end <= n.size_bytes);
    if !in_range {
        // The protocol asks for ENOSPC on writes past the end, EINVAL otherwise.
        let errno = if matches!(h.kind, CMD_WRITE | CMD_WRITE_ZEROES) {
            ENOSPC
        } else {
            EINVAL
        };
        return Err(reject(errno, "request extends past the end of the export"));
    }
    Ok(command_of(h))
}

/// The command flags valid for `kind` under the negotiated flags, or None for a command
/// this server does not implement.
fn allowed_flags(kind: u16, n: &Negotiated) -> Option<u16> {
    let fua = if n.tx_flags & TX_SEND_FUA != 0 {
        CMD_FLAG_FUA
    } else {
        0
    };
    let df = if n.structured && n.tx_flags & TX_SEND_DF != 0 {
        CMD_FLAG_DF
    } else {
        0
    };
    match kind {
        // FUA is accepted (and ignored where nothing is written) on every command once
        // advertised, as the protocol requires.
        CMD_READ => Some(fua | df),
        CMD_WRITE | CMD_TRIM | CMD_FLUSH | CMD_DISC => Some(fua),
        CMD_WRITE_ZEROES => Some(fua | CMD_FLAG_NO_HOLE),
        // Only once a metadata context was selected (else: an unknown command).
        CMD_BLOCK_STATUS if n.block_status => Some(fua | CMD_FLAG_REQ_ONE),
        _ => None,
    }
}

fn command_of(h: &RequestHeader) -> Command {
    let (offset, length) = (h.offset, h.length);
    let fua = h.flags & CMD_FLAG_FUA != 0;
    match h.kind {
        CMD_READ => Command::Read { offset, length },
        CMD_WRITE => Command::Write {
            offset,
            length,
            fua,
        },
        CMD_TRIM => Command::Trim {
            offset,
            length,
            fua,
        },
        CMD_WRITE_ZEROES => Command::WriteZeroes {
            offset,
            length,
            fua,
            may_trim: h.flags & CMD_FLAG_NO_HOLE == 0,
        },
        CMD_BLOCK_STATUS => Command::BlockStatus {
            offset,
            length,
            req_one: h.flags & CMD_FLAG_REQ_ONE != 0,
        },
        other => unreachable!("command {other} passed allowed_flags"),
    }
}

/// The data of `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT`: the export
/// name and the queries.
pub fn parse_meta_context_request(data: &[u8]) -> Result<(&str, Vec<&str>), &'static str> {
    let take = |at: usize| -> Result<usize, &'static str> {
        data.get(at..at + 4)
            .map(|b| be_u32(b, 0) as usize)
            .ok_or("meta context request is too short")
    };
    let name_len = take(0)?;
    let name_end = 4usize.checked_add(name_len).ok_or("bad name length")?;
    let name = parse_string(
        data.get(4..name_end)
            .ok_or("export name runs past the data")?,
    )?;
    let count = take(name_end)?;
    let mut at = name_end + 4;
    let mut queries = Vec::new();
    for _ in 0..count {
        let len = take(at)?;
        let end = (at + 4).checked_add(len).ok_or("bad query length")?;
        let q = data.get(at + 4..end).ok_or("query runs past the data")?;
        queries.push(parse_string(q)?);
        at = end;
    }
    if at != data.len() {
        return Err("meta context request has trailing bytes");
    }
    Ok((name, queries))
}

/// One `NBD_REP_META_CONTEXT` reply naming context `id`.
pub fn encode_meta_context_reply(option: u32, id: u32, name: &str) -> Vec<u8> {
    let mut data = id.to_be_bytes().to_vec();
    data.extend_from_slice(name.as_bytes());
    encode_option_reply(option, REP_META_CONTEXT, &data)
}

/// A final `NBD_REPLY_TYPE_BLOCK_STATUS` chunk for context `id`: (length, flags) extents.
pub fn encode_block_status_chunk(cookie: u64, id: u32, extents: &[(u32, u32)]) -> Vec<u8> {
    let len = 4 + 8 * extents.len();
    let mut b = vec![0u8; CHUNK_HEADER_BYTES + len];
    write_chunk_header(
        &mut b,
        REPLY_FLAG_DONE,
        REPLY_TYPE_BLOCK_STATUS,
        cookie,
        len as u32,
    );
    let mut at = CHUNK_HEADER_BYTES;
    b[at..at + 4].copy_from_slice(&id.to_be_bytes());
    for (length, flags) in extents {
        at += 4;
        b[at..at + 4].copy_from_slice(&length.to_be_bytes());
        at += 4;
        b[at..at + 4].copy_from_slice(&flags.to_be_bytes());
    }
    b
}

/// A simple reply header (no data follows unless it answers a successful read).
pub fn encode_simple_reply(cookie: u64, errno: u32) -> [u8; SIMPLE_REPLY_BYTES] {
    let mut b = [0u8; SIMPLE_REPLY_BYTES];
    write_simple_reply(&mut b, cookie, errno);
    b
}

/// Writes a simple reply header into the first 16 bytes of `b`.
pub fn write_simple_reply(b: &mut [u8], cookie: u64, errno: u32) {
    b[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&errno.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
}

/// Writes a structured chunk header into the first 20 bytes of `b`.
pub fn write_chunk_header(b: &mut [u8], flags: u16, kind: u16, cookie: u64, length: u32) {
    b[..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&kind.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b[16..20].copy_from_slice(&length.to_be_bytes());
}

/// Writes the 28-byte prefix of a final `OFFSET_DATA` chunk carrying `data_len` bytes.
pub fn write_offset_data_prefix(b: &mut [u8], cookie: u64, offset: u64, data_len: u32) {
    write_chunk_header(
        b,
        REPLY_FLAG_DONE,
        REPLY_TYPE_OFFSET_DATA,
        cookie,
        data_len + 8,
    );
    b[20..28].copy_from_slice(&offset.to_be_bytes());
}

/// A final `NBD_REPLY_TYPE_ERROR` chunk with a human-readable message.
pub fn encode_error_chunk(cookie: u64, errno: u32, message: &str) -> Vec<u8> {
    let msg = &message.as_bytes()[..message.len().min(u16::MAX as usize)];
    let mut b = vec![0u8; CHUNK_HEADER_BYTES];
    write_chunk_header(
        &mut b,
        REPLY_FLAG_DONE,
        REPLY_TYPE_ERROR,
        cookie,
        6 + msg.len() as u32,
    );
    b.extend_from_slice(&errno.to_be_bytes());
    b.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    b.extend_from_slice(msg);
    b
}

/// Parsed structured chunk header (used by tests and the fuzz target to check replies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    pub flags: u16,
    pub kind: u16,
    pub cookie: u64,
    pub length: u32,
}

pub fn parse_chunk_header(b: &[u8; CHUNK_HEADER_BYTES]) -> Result<ChunkHeader, ProtoError> {
    let magic = be_u32(b, 0);
    if magic != STRUCTURED_REPLY_MAGIC {
        return Err(ProtoError::BadMagic {
            expected: STRUCTURED_REPLY_MAGIC.into(),
            found: magic.into(),
        });
    }
    Ok(ChunkHeader {
        flags: be_u16(b, 4),
        kind: be_u16(b, 6),
        cookie: be_u64(b, 8),
        length: be_u32(b, 16),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiated(read_only: bool) -> Negotiated {
        let tx = if read_only {
            TX_HAS_FLAGS | TX_READ_ONLY
        } else {
            TX_HAS_FLAGS | TX_SEND_FLUSH | TX_SEND_FUA | TX_SEND_TRIM | TX_SEND_WRITE_ZEROES
        };
        Negotiated {
            size_bytes: 1 << 20,
            tx_flags: tx,
            structured: false,
            max_payload_bytes: 65536,
            block_status: false,
        }
    }

    fn req(kind: u16, flags: u16, offset: u64, length: u32) -> RequestHeader {
        RequestHeader {
            flags,
            kind,
            cookie: 7,
            offset,
            length,
        }
    }

    #[test]
    fn greeting_bytes_are_the_magic_words() {
        let g = encode_greeting();
        assert_eq!(&g[..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        assert_eq!(&g[16..], &[0, 3]);
    }

    #[test]
    fn client_flags_reject_unknown_bits() {
        assert_eq!(
            parse_client_flags([0, 0, 0, 3]),
            Ok(ClientFlags {
                fixed_newstyle: true,
                no_zeroes: true
            })
        );
        assert_eq!(
            parse_client_flags([0, 0, 0, 4]),
            Err(ProtoError::UnknownClientFlags(4))
        );
    }

    #[test]
    fn info_request_lengths_must_add_up() {
        // name "ab", 2 infos: NAME, BLOCK_SIZE.
        let data = [0, 0, 0, 2, b'a', b'b', 0, 2, 0, 1, 0, 3];
        let r = parse_info_request(&data).unwrap();
        assert_eq!(r.name, "ab");
        assert_eq!(r.infos, vec![1, 3]);
        assert!(parse_info_request(&data[..11]).is_err());
        assert!(parse_info_request(&[0, 0, 0, 9, b'a', 0, 0]).is_err());
        assert!(parse_info_request(&[0xff, 0xff, 0xff, 0xff, 0, 0]).is_err());
        assert!(
            parse_info_request(&[0, 0, 0, 1, 0, 0, 0]).is_err(),
            "NUL in the name"
        );
    }

    #[test]
    fn request_header_round_trips_and_checks_magic() {
        let h = req(CMD_WRITE, CMD_FLAG_FUA, 4096, 512);
        let b = encode_request_header(&h);
        assert_eq!(parse_request_header(&b), Ok(h));
        let mut bad = b;
        bad[0] ^= 1;
        assert!(matches!(
            parse_request_header(&bad),
            Err(ProtoError::BadMagic { .. })
        ));
    }

    #[test]
    fn check_request_errnos_follow_the_protocol() {
        let n = negotiated(false);
        let e = |h| check_request(&h, &n).unwrap_err().errno;
        assert_eq!(e(req(9, 0, 0, 1)), EINVAL, "unknown command");
        assert_eq!(e(req(CMD_READ, 1 << 7, 0, 1)), EINVAL, "unknown flag");
        assert_eq!(
            e(req(CMD_READ, CMD_FLAG_DF, 0, 1)),
            EINVAL,
            "DF without structured"
        );
        assert_eq!(e(req(CMD_WRITE, CMD_FLAG_NO_HOLE, 0, 1)), EINVAL);
        assert_eq!(
            e(req(CMD_READ, 0, (1 << 20) - 1, 2)),
            EINVAL,
            "read past end"
        );
        assert_eq!(e(req(CMD_WRITE, 0, 1 << 20, 1)), ENOSPC, "write past end");
        assert_eq!(
            e(req(CMD_WRITE_ZEROES, 0, u64::MAX, 1)),
            ENOSPC,
            "offset overflow"
        );
        assert_eq!(e(req(CMD_TRIM, 0, 1 << 20, 1)), EINVAL);
        assert_eq!(e(req(CMD_READ, 0, 0, 65537)), EOVERFLOW);
        assert_eq!(e(req(CMD_READ, 0, 0, 0)), EINVAL, "zero length");
        assert_eq!(e(req(CMD_FLUSH, 0, 0, 1)), EINVAL);
        let w = check_request(&req(CMD_WRITE, 0, 1 << 20, 100), &n).unwrap_err();
        assert_eq!(
            w.discard_bytes, 100,
            "a refused write's payload is still on the wire"
        );
        // Trim and write-zeroes carry no payload, so they may exceed the payload limit.
        assert_eq!(
            check_request(&req(CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE, 0, 1 << 20), &n),
            Ok(Command::WriteZeroes {
                offset: 0,
                length: 1 << 20,
                fua: false,
                may_trim: false
            })
        );
        assert_eq!(
            check_request(&req(CMD_FLUSH, CMD_FLAG_FUA, 0, 0), &n),
            Ok(Command::Flush),
            "FUA is accepted on any command once advertised"
        );
    }

    #[test]
    fn read_only_refuses_writes_with_eperm() {
        let n = negotiated(true);
        for kind in [CMD_WRITE, CMD_TRIM, CMD_WRITE_ZEROES] {
            assert_eq!(
                check_request(&req(kind, 0, 0, 4096), &n).unwrap_err().errno,
                EPERM
            );
        }
        assert_eq!(
            check_request(&req(CMD_READ, CMD_FLAG_FUA, 0, 1), &n)
                .unwrap_err()
                .errno,
            EINVAL,
            "FUA was not advertised on a read-only export"
        );
        assert_eq!(
            check_request(&req(CMD_READ, 0, 0, 4096), &n),
            Ok(Command::Read {
                offset: 0,
                length: 4096
            })
        );
    }

    #[test]
    fn error_chunk_layout() {
        let b = encode_error_chunk(0x1122, EINVAL, "no");
        let h = parse_chunk_header(b[..20].try_into().unwrap()).unwrap();
        assert_eq!(
            h,
            ChunkHeader {
                flags: REPLY_FLAG_DONE,
                kind: REPLY_TYPE_ERROR,
                cookie: 0x1122,
                length: 8
            }
        );
        assert_eq!(&b[20..], &[0, 0, 0, 22, 0, 2, b'n', b'o']);
    }

    #[test]
    fn meta_context_requests_parse_and_refuse_garbage() {
        let mut d = Vec::new();
        d.extend(3u32.to_be_bytes());
        d.extend(b"img");
        d.extend(2u32.to_be_bytes());
        for q in ["base:allocation", "qemu:dirty-bitmap:x"] {
            d.extend((q.len() as u32).to_be_bytes());
            d.extend(q.as_bytes());
        }
        let (name, queries) = parse_meta_context_request(&d).unwrap();
        assert_eq!(name, "img");
        assert_eq!(queries, vec!["base:allocation", "qemu:dirty-bitmap:x"]);
        assert!(parse_meta_context_request(&d[..d.len() - 1]).is_err());
        let mut long = d.clone();
        long.push(0);
        assert!(parse_meta_context_request(&long).is_err());
        assert!(parse_meta_context_request(&[0, 0, 0]).is_err());
        assert!(parse_meta_context_request(&[0xff; 12]).is_err());
    }

    #[test]
    fn block_status_needs_a_selected_context_and_answers_in_one_chunk() {
        let mut n = negotiated(false);
        n.structured = true;
        let h = req(CMD_BLOCK_STATUS, CMD_FLAG_REQ_ONE, 4096, 8192);
        assert_eq!(check_request(&h, &n).unwrap_err().errno, EINVAL);
        n.block_status = true;
        assert_eq!(
            check_request(&h, &n).unwrap(),
            Command::BlockStatus {
                offset: 4096,
                length: 8192,
                req_one: true
            }
        );
        let b = encode_block_status_chunk(9, META_BASE_ALLOCATION_ID, &[(4096, 0), (4096, 3)]);
        let head = parse_chunk_header(b[..CHUNK_HEADER_BYTES].try_into().unwrap()).unwrap();
        assert_eq!(
            (head.flags, head.kind, head.cookie, head.length),
            (REPLY_FLAG_DONE, REPLY_TYPE_BLOCK_STATUS, 9, 20)
        );
        assert_eq!(&b[20..24], &1u32.to_be_bytes());
        assert_eq!(&b[32..36], &4096u32.to_be_bytes());
        assert_eq!(&b[36..40], &3u32.to_be_bytes());
    }
}
