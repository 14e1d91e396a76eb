//! A checksummed envelope for state kept in files beside an image (the learning state,
//! the plan of a reconfiguration under way): magic, format version, payload length and
//! the payload's CRC-32C, then the payload. Such files are written whole and renamed into
//! place, but a crash, a full disk or an older build may still leave one torn, corrupted
//! or of another version: [`unseal`] says which, so the reader ignores it (with a log
//! line) instead of trusting it.

/// Why sealed bytes were not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("not a {what} file (bad magic)")]
    Magic { what: &'static str },
    #[error("{what} format version {found}, this build reads version {expected}")]
    Version {
        what: &'static str,
        found: u32,
        expected: u32,
    },
    #[error("{what} is torn: {bytes} bytes where the header promises {promised}")]
    Truncated {
        what: &'static str,
        bytes: usize,
        promised: u64,
    },
    #[error("{what} fails its checksum (torn or corrupted)")]
    Checksum { what: &'static str },
}

/// Magic (8 bytes), version, payload length, payload checksum.
const HEADER_BYTES: usize = 8 + 4 + 8 + 4;

/// What a sealed file holds: its 8-byte magic, format version and name in messages.
#[derive(Clone, Copy, Debug)]
pub struct SealKind {
    pub magic: &'static [u8; 8],
    pub version: u32,
    pub what: &'static str,
}

impl SealKind {
    /// `payload` behind a header that lets [`SealKind::unseal`] check it.
    pub fn seal(&self, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
        out.extend_from_slice(self.magic);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// The payload of [`SealKind::seal`]'s bytes, checked whole: each field in header
    /// order, each check one test (a file too short for a field is torn, unless what it
    /// holds already says it is not ours).
    pub fn unseal<'b>(&self, bytes: &'b [u8]) -> Result<&'b [u8], SealError> {
        let what = self.what;
        let torn = |promised| SealError::Truncated {
            what,
            bytes: bytes.len(),
            promised,
        };
        if bytes.len() < 8 {
            return Err(torn(0));
        }
        if &bytes[..8] != self.magic {
            return Err(SealError::Magic { what });
        }
        if bytes.len() < HEADER_BYTES {
            return Err(torn(0));
        }
        let found = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if found != self.version {
            let expected = self.version;
            return Err(SealError::Version {
                what,
                found,
                expected,
            });
        }
        let promised = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
        let payload = &bytes[HEADER_BYTES..];
        if payload.len() as u64 != promised {
            return Err(torn(promised));
        }
        let crc = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes"));
        if crc32c::crc32c(payload) != crc {
            return Err(SealError::Checksum { what });
        }
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: SealKind = SealKind {
        magic: b"RBTEST\0\0",
        version: 3,
        what: "test state",
    };

    #[test]
    fn sealed_bytes_come_back_and_every_damage_is_named() {
        let bytes = KIND.seal(b"payload");
        assert_eq!(KIND.unseal(&bytes).unwrap(), b"payload");
        let torn = KIND.unseal(&bytes[..bytes.len() - 1]).unwrap_err();
        assert!(
            matches!(torn, SealError::Truncated { promised: 7, .. }),
            "{torn}"
        );
        for n in 0..bytes.len() {
            assert!(
                matches!(KIND.unseal(&bytes[..n]), Err(SealError::Truncated { .. })),
                "a {n}-byte prefix is torn"
            );
        }
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 0x40;
        assert_eq!(
            KIND.unseal(&flipped).unwrap_err().to_string(),
            "test state fails its checksum (torn or corrupted)"
        );
        let mut old = bytes.clone();
        old[8] = 2;
        let e = KIND.unseal(&old).unwrap_err();
        assert!(
            matches!(
                e,
                SealError::Version {
                    found: 2,
                    expected: 3,
                    ..
                }
            ),
            "{e}"
        );
        assert!(matches!(
            KIND.unseal(b"garbage!!"),
            Err(SealError::Magic { .. })
        ));
    }
}
