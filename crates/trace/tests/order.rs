//! Time order: readers hand out requests sorted by timestamp, moving late ones into place
//! within the reorder window, failing on one further behind (naming its line), or sorting
//! the whole trace when asked.

use proptest::prelude::*;
use reblock_trace::parquet::ParquetWriter;
use reblock_trace::{
    Commands, FormatChoice, Op, ReadOptions, Request, TimeOrder, TraceError, TraceReader,
};

/// A native trace whose lines have these timestamps (sector = line number, for identity).
fn native(ts: &[u64]) -> Vec<u8> {
    let lines = ts.iter().enumerate();
    lines
        .map(|(i, t)| format!("{t} 1 cc {} 8 R\n", i + 1))
        .collect::<String>()
        .into_bytes()
}

/// The requests (timestamp, sector) read with `order`, or the error.
fn read(text: Vec<u8>, order: TimeOrder) -> Result<(Vec<(u64, u64)>, u64), TraceError> {
    let opts = ReadOptions {
        format: FormatChoice::Named("native".into()),
        skip_bad: 0,
    };
    let input = Box::new(std::io::Cursor::new(text));
    let mut r = TraceReader::from_reader(input, "t", &opts)?;
    r.set_time_order(order);
    let mut out = Vec::new();
    while let Some(q) = r.next_request()? {
        out.push((q.ts_ns, q.sector));
    }
    Ok((out, r.order_stats().moved))
}

const MS: u64 = 1_000_000;

#[test]
fn late_requests_within_the_window_are_moved_into_place() {
    // Line 3 is 2 ms behind line 2: within the default 10 ms window.
    let ts = [10 * MS, 14 * MS, 12 * MS, 20 * MS];
    let (got, moved) = read(native(&ts), TimeOrder::default()).unwrap();
    assert_eq!(
        got,
        vec![(10 * MS, 1), (12 * MS, 3), (14 * MS, 2), (20 * MS, 4)]
    );
    assert_eq!(moved, 1);
}

/// The case: time going back by half a second is an error naming the line.
#[test]
fn a_request_beyond_the_window_is_an_error_naming_its_line() {
    let ts = [1_000 * MS, 2_000 * MS, 1_500 * MS];
    let e = read(native(&ts), TimeOrder::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "t:3: field timestamp: 1.500000000 s is 0.500000000 s before a request already \
         read (at 2.000000000 s), more than the 0.010000000 s reorder window; pass --sort \
         to sort the whole trace, or a wider --reorder-window"
    );
    // A wider window or sorting reads it, in order.
    let want = vec![(1_000 * MS, 1), (1_500 * MS, 3), (2_000 * MS, 2)];
    let wide = TimeOrder::Window { ns: 600 * MS };
    assert_eq!(read(native(&ts), wide).unwrap(), (want.clone(), 1));
    assert_eq!(read(native(&ts), TimeOrder::Sort).unwrap(), (want, 1));
    // Window 0: only an ordered trace.
    let e = read(native(&[5, 4]), TimeOrder::Window { ns: 0 }).unwrap_err();
    assert!(e.to_string().starts_with("t:2: field timestamp:"), "{e}");
}

#[test]
fn sorting_keeps_equal_timestamps_in_file_order() {
    let ts = [30, 10, 20, 10, 30, 0];
    let (got, moved) = read(native(&ts), TimeOrder::Sort).unwrap();
    assert_eq!(
        got,
        vec![(0, 6), (10, 2), (10, 4), (20, 3), (30, 1), (30, 5)]
    );
    assert_eq!(moved, 4);
}

/// Parquet rows carry no line: the error names the request.
#[test]
fn a_late_parquet_row_is_named_by_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let commands = Commands::new();
    let mut w = ParquetWriter::create(&path).unwrap();
    for (i, ts) in [5_000 * MS, 6_000 * MS, 1_000 * MS].into_iter().enumerate() {
        let r = Request::try_new(ts, None, 0, 0, i as u64 * 8, 8, Op::Read).unwrap();
        w.push(r, &commands).unwrap();
    }
    w.finish(&commands).unwrap();
    let e = TraceReader::open(&path, &ReadOptions::default())
        .unwrap()
        .read_all()
        .unwrap_err();
    let want = format!(
        "{}: request 3: field timestamp: 1.000000000 s",
        path.display()
    );
    assert!(e.to_string().starts_with(&want), "{e}");
}

proptest! {
    /// Whatever the timestamps and the window: the reader hands out exactly the requests
    /// of the file, stably sorted by timestamp, and fails exactly when some request is
    /// further behind the latest before it than the window. Traces long enough to span
    /// several of the reader's batches.
    #[test]
    fn reading_sorts_stably_or_names_the_first_request_too_late(
        steps in prop::collection::vec(-60i64..100, 1..1500),
        window in prop_oneof![Just(0u64), 0u64..200, Just(u64::MAX)],
        sort in any::<bool>(),
    ) {
        let mut t = 1_000i64;
        let ts: Vec<u64> = steps.iter().map(|s| { t = (t + s).max(0); t as u64 }).collect();
        let order = if sort { TimeOrder::Sort } else { TimeOrder::Window { ns: window } };
        let mut latest = 0;
        let mut first_late = None;
        for (i, &x) in ts.iter().enumerate() {
            if x < latest && latest - x > window && first_late.is_none() && !sort {
                first_late = Some(i + 1);
            }
            latest = latest.max(x);
        }
        match (read(native(&ts), order), first_late) {
            (Ok((got, moved)), None) => {
                let mut want: Vec<(u64, u64)> =
                    ts.iter().enumerate().map(|(i, &x)| (x, i as u64 + 1)).collect();
                want.sort_by_key(|&(x, _)| x);
                prop_assert_eq!(got, want);
                let mut max = 0;
                let late = ts.iter().filter(|&&x| { let l = x < max; max = max.max(x); l }).count();
                prop_assert_eq!(moved, late as u64);
            }
            (Err(e), Some(line)) => {
                let want = format!("t:{line}: field timestamp:");
                prop_assert!(e.to_string().starts_with(&want), "{}", e);
            }
            (got, want) => prop_assert!(false, "{:?} but the first late line is {:?}", got.map(|g| g.1), want),
        }
    }
}
