//! Bad input: every message names the file, the line and the field, in full.

use std::io::Write;
use std::path::PathBuf;

use reblock_trace::{FormatChoice, ReadOptions, TraceReader};

fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn opts(format: &str, skip_bad: usize) -> ReadOptions {
    ReadOptions {
        format: format.parse::<FormatChoice>().unwrap(),
        skip_bad,
    }
}

/// The error reading `text` as `format` produces, rendered.
fn error(format: &str, text: &str) -> (String, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "t", text);
    let result = TraceReader::open(&path, &opts(format, 0)).and_then(|r| r.read_all());
    (result.unwrap_err().to_string(), path)
}

#[test]
fn malformed_lines_name_file_line_and_field() {
    let cases = [
        ("native", "1 2 cc 3 8 R\n5 6 dd 7 0 W\n", 2, "field sectors: a request of 0 sectors"),
        ("native", "1 2 cc 3 8 R\n1 2 cc 3 8 R 7 extra\n", 2, "field line: unexpected extra field 'extra'"),
        ("native", "1 2 cc 3 8 R\n1 2 cc 3 8 R extra\n", 2, "field device: 'extra' is not an integer in 0..=4294967295"),
        (
            "msr",
            "128166386783630075,hm,0,Write,3164164096,40960,2896\n128166386783630309,hm,0,Write,1000,16384,2663\n",
            2,
            "field offset: byte offset 1000 is not a multiple of 512 (a sector)",
        ),
        ("msr", "100,hm,0,Write,0,512,1\n", 1, "field timestamp: FILETIME 100 is before 1970"),
        ("spc", "0,303567,3584,x,0.000000\n", 1, "field opcode: 'x' is not r or w"),
        ("spc", "0,303567,3584,w,1e-3\n", 1, "field timestamp: '1e-3' is not a non-negative decimal number"),
        (
            "fiu",
            "89966811921625 4257 nfsd 488846200 8 W 6 0 2c4787c7\n",
            1,
            "field md5: '2c4787c7' is not 32 hex digits",
        ),
        (
            "blkparse",
            "  8,16   5        2     0.000001850 18615  Q   R 1444645666 - 256 [java]\n",
            1,
            "field +: expected '+' between sector and size",
        ),
        ("ascii", "0 0 303567 7 2\n", 1, "field op: '2' is not 1 (read) or 0 (write)"),
        ("msr-windows", "0.5 0 512 0 1\n", 1, "field size: a request of 0 bytes"),
        ("blkreplay", "0.1 ; 8 ; 8 ; W ; 0.0 ; 0.0\n0.2 ; 8 ; 8 ; X ; 0.0 ; 0.0\n", 2, "field op: 'X' is not a blktrace RWBS string"),
        ("cloudphysics", "version,time,op,size,lbn\n1,5,zz,512,4\n", 2, "field op: 'zz' is not a SCSI opcode in hex"),
    ];
    for (format, text, line, why) in cases {
        let (got, path) = error(format, text);
        assert_eq!(got, format!("{}:{line}: {why}", path.display()), "{format}");
    }
}

#[test]
fn skip_bad_tolerates_n_and_fails_on_n_plus_one() {
    let dir = tempfile::tempdir().unwrap();
    let text = "1 2 cc 3 8 R\n2 2 cc x 8 R\n3 2 cc 3 8 W\n4 2 cc 3 8 Q\n5 2 cc 3 8 R\n";
    let path = file(&dir, "t", text);
    let mut r = TraceReader::open(&path, &opts("native", 2)).unwrap();
    let mut n = 0;
    while r.next_request().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 3);
    let bad: Vec<(u64, String)> = r
        .bad_lines()
        .iter()
        .map(|b| (b.line, b.error.to_string()))
        .collect();
    assert_eq!(
        bad,
        [
            (
                2,
                "field sector: 'x' is not a non-negative integer".to_string()
            ),
            (4, "field op: 'Q' is not R or W".to_string()),
        ]
    );
    let e = TraceReader::open(&path, &opts("native", 1))
        .unwrap()
        .read_all()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: more than 1 bad lines (--skip-bad 1); the last: line 4: field op: 'Q' is not R or W",
            path.display()
        )
    );
}

#[test]
fn unknown_format_lists_the_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "t", "1 2 cc 3 8 R\n");
    let e = TraceReader::open(&path, &opts("excel", 0)).err().unwrap();
    assert_eq!(
        e.to_string(),
        "unknown trace format 'excel'; supported: native, blkparse, fiu, msr, spc, ascii, \
         msr-windows, blkreplay, cloudphysics, tracefs, parquet"
    );
}

#[test]
fn empty_file_says_it_is_empty() {
    for format in ["auto", "native", "msr"] {
        let (got, path) = error(format, "");
        assert_eq!(
            got,
            format!("{}: the trace is empty (no requests)", path.display()),
            "{format}"
        );
    }
    // blank lines only: still empty, not "unknown format"
    let (got, path) = error("auto", "\n  \n\n");
    assert_eq!(
        got,
        format!("{}: the trace is empty (no requests)", path.display())
    );
}

#[test]
fn unrecognised_text_asks_for_format() {
    let (got, path) = error("auto", "hello world\n");
    assert_eq!(
        got,
        format!(
            "{}: cannot tell the trace format from the first lines; pass --format (one of: \
             native, blkparse, fiu, msr, spc, ascii, msr-windows, blkreplay, cloudphysics, \
             tracefs, parquet)",
            path.display()
        )
    );
}

/// Regression: bytes that are not UTF-8 made the whole line "field line: not valid
/// UTF-8", and among the first lines they kept `auto` from telling the format. Now the
/// field holding them is named, for every way in.
#[test]
fn invalid_utf8_names_the_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(b"1 2 cc 3 8 R\n1 2 c\xff 3 8 R\n").unwrap();
    drop(f);
    for format in ["auto", "native"] {
        let e = TraceReader::open(&path, &opts(format, 0))
            .unwrap()
            .read_all()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}:2: field command: not valid UTF-8 (byte 6 of the line)",
                path.display()
            )
        );
    }
    // In a number: that field. In a line no format reads as a request: the line.
    for (text, format, want) in [
        (
            &b"1 2 cc 3\xff 8 R\n"[..],
            "native",
            "1: field sector: not valid UTF-8 (byte 9",
        ),
        (
            b"0,303567,35\xe984,w,0.0\n",
            "spc",
            "1: field size: not valid UTF-8 (byte 12",
        ),
        (
            b"0,hm\xff,0,Read,0,512,1\n",
            "msr",
            "1: field timestamp: FILETIME 0",
        ),
        (
            b"116444736000000000,h\xffm,0,Read,0,512,1\n",
            "msr",
            "1: field hostname: not valid",
        ),
    ] {
        std::fs::write(&path, text).unwrap();
        let e = TraceReader::open(&path, &opts(format, 0))
            .and_then(|r| r.read_all())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("{}:{want}", path.display())), "{e}");
    }
}

/// Addresses that overflow or do not fit 64-bit byte offsets, negative and non-numeric
/// sizes: each an error naming the line and the field, never a wrapped request.
#[test]
fn addresses_that_do_not_fit_name_line_and_field() {
    let cases = [
        // The case: 18446744073709551600 + 64 wraps past 2^64 sectors.
        ("native", "1 2 cc 3 8 R\n2 2 cc 18446744073709551600 64 R\n", 2, "field sector: sector 18446744073709551600 + 64 sectors ends past the last addressable sector (36028797018963967, the end of a 64-bit byte address space)"),
        // Inside 2^64 sectors, but past 2^64 bytes.
        ("native", "1 2 cc 36028797018963960 8 W\n", 1, "field sector: sector 36028797018963960 + 8 sectors ends past"),
        ("native", "1 2 cc 3 -8 R\n", 1, "field sectors: '-8' is not an integer in 0..=4294967295"),
        ("native", "1 2 cc x3 8 R\n", 1, "field sector: 'x3' is not a non-negative integer"),
        ("ascii", "0 0 18446744073709551615 8 1\n", 1, "field lba: sector 18446744073709551615 + 8 sectors ends past"),
        ("spc", "0,36028797018963967,512,r,0.0\n", 1, "field lba: sector 36028797018963967 + 1 sectors ends past"),
        ("spc", "0,3,-512,r,0.0\n", 1, "field size: '-512' is not a non-negative integer"),
        ("fiu", "1 2 p 36028797018963967 1 R 8 0 2c4787c7671c2f638777c4ab72859ce1\n", 1, "field lba: sector 36028797018963967 + 1 sectors ends past"),
        ("msr", "128166386783630075,hm,0,Write,18446744073709551104,4096,2896\n", 1, "field offset: sector 36028797018963967 + 8 sectors ends past"),
        ("msr-windows", "1.0 0 18446744073709551104 512 1\n", 1, "field offset: sector 36028797018963967 + 1 sectors ends past"),
        ("blkparse", "  8,0 1 1 1.0 42 Q R 18446744073709551615 + 8 [a]\n", 1, "field sector: sector 18446744073709551615 + 8 sectors ends past"),
        ("blkreplay", "0.5 ; 18446744073709551615 ; 8 ; R ; 0.0 ; 0.0\n", 1, "field sector: sector 18446744073709551615 + 8 sectors ends past"),
        ("cloudphysics", "version,time,op,size,lbn\n1,5,28,4096,18446744073709551615\n", 2, "field lbn: sector 18446744073709551615 + 8 sectors ends past"),
        ("tracefs", "  dd-7137 [001] ..... 2801.159800: block_bio_queue: 7,0 WS 18446744073709551615 + 16 [dd]\n", 1, "field sector: sector 18446744073709551615 + 16 sectors ends past"),
    ];
    for (format, text, line, want) in cases {
        let (e, path) = error(format, text);
        let prefix = format!("{}:{line}: {want}", path.display());
        assert!(e.starts_with(&prefix), "{format}: {e}\nwant {prefix}");
    }
}
