//! CRC-32C (Castagnoli), the checksum of every on-disk structure and of every data page
//! in the optimized region (docs/format.md). The `crc32c` crate uses the CPU's CRC32
//! instruction where there is one: data-page checksums sit on the path of every read
//! and write of the BOPT, so their speed matters.

/// CRC-32C of the concatenation of `parts`.
pub fn crc32c(parts: &[&[u8]]) -> u32 {
    parts
        .iter()
        .fold(0, |crc, part| crc32c::crc32c_append(crc, part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_check_value() {
        // The CRC catalogue's check value for CRC-32/ISCSI over "123456789".
        assert_eq!(crc32c(&[b"123456789"]), 0xE306_9283);
        assert_eq!(crc32c(&[b"1234", b"56789"]), 0xE306_9283);
        assert_eq!(crc32c(&[b""]), 0);
    }
}
