//! Every reader against real lines copied from the shared traces (tests/data/README.md
//! says where each excerpt comes from). Expected fields are worked out by hand from the
//! quoted line, not taken from the reader's output.

use std::path::{Path, PathBuf};

use reblock_trace::{FormatChoice, Op, ReadOptions, Request, Trace, TraceReader};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn read(name: &str) -> (Trace, &'static str) {
    let reader = TraceReader::open(data(name), &ReadOptions::default()).unwrap();
    let format = reader.format_name();
    (reader.read_all().unwrap(), format)
}

/// The request at `index` with its command spelled out.
fn at(trace: &Trace, index: usize) -> (Request, String) {
    let r = trace.get(index);
    (r, trace.commands.name(r.command).to_string())
}

fn req(ts_ns: u64, pid: Option<u32>, device: u32, sector: u64, sectors: u32, op: Op) -> Request {
    Request {
        ts_ns,
        pid,
        command: 0,
        device,
        sector,
        sectors,
        op,
    }
}

/// Compares all fields but the command id, whose value depends on interning order.
fn check(trace: &Trace, index: usize, want: Request, command: &str) {
    let (mut got, name) = at(trace, index);
    got.command = 0;
    assert_eq!(got, want, "request {index}");
    assert_eq!(name, command, "command of request {index}");
}

#[test]
fn native_captured() {
    // line 3: `430520000 4129 bash 12648728 8 R`
    let (t, f) = read("native-dev_kernel.txt");
    assert_eq!(f, "native");
    assert_eq!(t.len(), 300);
    check(
        &t,
        2,
        req(430_520_000, Some(4129), 0, 12_648_728, 8, Op::Read),
        "bash",
    );
}

#[test]
fn blkparse_keeps_queue_events_only() {
    // 300 lines hold 15 Q events (A, G, I, M, m, P, U... are skipped). The 11th, line 196:
    // `  8,16   0        2     0.629226337 20246  Q   W 935733770 + 8 [java]`
    let (t, f) = read("blkparse-jxu.txt");
    assert_eq!(f, "blkparse");
    assert_eq!(t.len(), 15);
    let dev_8_16 = (8 << 20) | 16;
    check(
        &t,
        10,
        req(
            629_226_337,
            Some(20246),
            dev_8_16,
            935_733_770,
            8,
            Op::Write,
        ),
        "java",
    );
    // line 2: `  8,16   5        2     0.000001850 18615  Q   R 1444645666 + 256 [java]`
    check(
        &t,
        0,
        req(1_850, Some(18615), dev_8_16, 1_444_645_666, 256, Op::Read),
        "java",
    );
}

#[test]
fn blkparse_without_queue_events_reads_dispatches() {
    // 200 D lines, two of them 'N' (no data); then blkparse's summary, which is skipped.
    // line 2: `  8,33  30        1     0.001368096  5025  D   R 540544 + 8 [systemd-udevd]`
    let (t, f) = read("blkparse-wiscsee-d-only.txt");
    assert_eq!(f, "blkparse");
    assert_eq!(t.len(), 198);
    let dev = (8 << 20) | 33;
    check(
        &t,
        0,
        req(1_368_096, Some(5025), dev, 540_544, 8, Op::Read),
        "systemd-udevd",
    );
    // the last D line, 200: `  8,33   8      117     0.179383942  5026  D  WS 75776 + 512 [fio]`
    check(
        &t,
        197,
        req(179_383_942, Some(5026), dev, 75_776, 512, Op::Write),
        "fio",
    );
}

#[test]
fn fiu() {
    // line 11: `89968195447404 20782 gzip 283193112 8 R 6 0 ef58ea75660587908a49b83a338bff34`
    let (t, f) = read("fiu.txt");
    assert_eq!(f, "fiu");
    assert_eq!(t.len(), 300);
    check(
        &t,
        10,
        req(
            89_968_195_447_404,
            Some(20782),
            6 << 20,
            283_193_112,
            8,
            Op::Read,
        ),
        "gzip",
    );
}

#[test]
fn msr_cambridge() {
    // line 123: `128166386973385753,hm,0,Read,2017484800,4096,89754`
    // FILETIME - 116444736000000000 = 11721650973385753 ticks of 100 ns since 1970;
    // 2017484800 / 512 = 3940400; 4096 / 512 = 8.
    let (t, f) = read("msr-hm_0.csv");
    assert_eq!(f, "msr");
    assert_eq!(t.len(), 300);
    check(
        &t,
        122,
        req(1_172_165_097_338_575_300, None, 0, 3_940_400, 8, Op::Read),
        "hm",
    );
}

#[test]
fn spc_financial1() {
    // line 5: `1,55596,3072,r,0.078643`
    let (t, f) = read("spc-financial1.spc");
    assert_eq!(f, "spc");
    assert_eq!(t.len(), 300);
    check(&t, 4, req(78_643_000, None, 1, 55_596, 6, Op::Read), "");
    // line 1: `0,303567,3584,w,0.000000`: 3584 bytes = 7 sectors
    check(&t, 0, req(0, None, 0, 303_567, 7, Op::Write), "");
}

#[test]
fn ascii_financial1_is_the_same_requests_as_spc() {
    let (ascii, f) = read("ascii-financial1.txt");
    assert_eq!(f, "ascii");
    let (spc, _) = read("spc-financial1.spc");
    assert_eq!(ascii.len(), spc.len());
    // line 5 of the ascii: `78643005 1 55596 6 1`
    check(&ascii, 4, req(78_643_005, None, 1, 55_596, 6, Op::Read), "");
    for i in 0..ascii.len() {
        let (a, s) = (ascii.get(i), spc.get(i));
        assert_eq!(
            (a.device, a.sector, a.sectors, a.op),
            (s.device, s.sector, s.sectors, s.op)
        );
        // SPC keeps microseconds
        assert_eq!((a.ts_ns + 500) / 1000, s.ts_ns / 1000, "request {i}");
    }
}

#[test]
fn ascii_tpcc() {
    // line 3: `938944000 13 93230992 32 0`
    let (t, f) = read("ascii-tpcc.txt");
    assert_eq!(f, "ascii");
    assert_eq!(t.len(), 200);
    check(
        &t,
        2,
        req(938_944_000, None, 13, 93_230_992, 32, Op::Write),
        "",
    );
}

#[test]
fn msr_windows() {
    // line 3: `22.810 0 2205343744 4096 1`: 22.810 ms; 2205343744 / 512 = 4307312
    let (t, f) = read("msr-windows-rw_40_60.txt");
    assert_eq!(f, "msr-windows");
    assert_eq!(t.len(), 300);
    check(&t, 2, req(22_810_000, None, 0, 4_307_312, 8, Op::Read), "");
}

#[test]
fn blkreplay_linux_mysql() {
    // 32 preamble lines, then 301 requests; line 35: `0.456676896 ; 0 ; 1 ; W ; 0.0 ; 0.0`
    let (t, f) = read("blkreplay-linux-mysql.load");
    assert_eq!(f, "blkreplay");
    assert_eq!(t.len(), 301);
    check(&t, 2, req(456_676_896, None, 0, 0, 1, Op::Write), "");
}

#[test]
fn blkreplay_windows_mssql_with_repeated_preamble() {
    // the license text appears twice (lines 1-32 and 33-58); line 60:
    // `      0.300422537 ;     13108142 ;    8 ; W ; 0.0 ; 0.0`
    let (t, f) = read("blkreplay-windows-mssql.load");
    assert_eq!(f, "blkreplay");
    assert_eq!(t.len(), 100);
    check(
        &t,
        1,
        req(300_422_537, None, 0, 13_108_142, 8, Op::Write),
        "",
    );
}

#[test]
fn cloudphysics() {
    // line 208: `1,5634908,28,32768,31185693`: READ(10), 32768 / 512 = 64 sectors
    let (t, f) = read("cloudphysics.csv");
    assert_eq!(f, "cloudphysics");
    assert_eq!(t.len(), 300);
    check(
        &t,
        206,
        req(5_634_908_000_000_000, None, 0, 31_185_693, 64, Op::Read),
        "",
    );
    // line 2: `1,5633898,2a,512,42932745`
    check(
        &t,
        0,
        req(5_633_898_000_000_000, None, 0, 42_932_745, 1, Op::Write),
        "",
    );
}

/// Every excerpt, run through `auto`: exactly the expected format claims it (the reader
/// refuses when two claim a file, so `open` succeeding with the right name proves it).
#[test]
fn auto_detect_chooses_exactly_the_expected_format() {
    let expected = [
        ("native-dev_kernel.txt", "native"),
        ("blkparse-jxu.txt", "blkparse"),
        ("blkparse-wiscsee-d-only.txt", "blkparse"),
        ("fiu.txt", "fiu"),
        ("msr-hm_0.csv", "msr"),
        ("spc-financial1.spc", "spc"),
        ("ascii-financial1.txt", "ascii"),
        ("ascii-tpcc.txt", "ascii"),
        ("msr-windows-rw_40_60.txt", "msr-windows"),
        ("blkreplay-linux-mysql.load", "blkreplay"),
        ("blkreplay-windows-mssql.load", "blkreplay"),
        ("cloudphysics.csv", "cloudphysics"),
    ];
    for (file, format) in expected {
        let text = std::fs::read_to_string(data(file)).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(128)
            .collect();
        let claims: Vec<&str> = reblock_trace::formats()
            .iter()
            .filter(|f| f.sniff(&lines))
            .map(|f| f.name())
            .collect();
        assert_eq!(claims, [format], "{file}");
        let r = TraceReader::open(data(file), &ReadOptions::default()).unwrap();
        assert_eq!(r.format_name(), format, "{file}");
    }
}

#[test]
fn named_format_is_used_without_sniffing() {
    let opts = ReadOptions {
        format: FormatChoice::Named("ascii".into()),
        skip_bad: 0,
    };
    let t = TraceReader::open(data("ascii-tpcc.txt"), &opts)
        .unwrap()
        .read_all()
        .unwrap();
    assert_eq!(t.len(), 200);
}
