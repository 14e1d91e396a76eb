"""The Spark job's vectorized sessionizer forms the sessions reblock's Sessionizer forms
(a request joins the open session when it arrives at or after the session's first
request and less than the window after it), chunk by chunk with the open session
carried across: checked against that rule written as a plain loop."""

import random

import numpy as np
import pytest

from reblock.spark import DEFAULT_PAIR_WINDOW, end_is_fixed, parse_session, session_ids


def sessions_by_rule(ts, window, carry=None):
    """The rule, one request at a time: each request's session id (its first index)."""
    start, ids = carry, []
    for i, t in enumerate(ts):
        if start is None or not (start[1] <= t < start[1] + window):
            start = (i, t)
        ids.append(start[0])
    return ids


def chunked(ts, window, cuts):
    """session_ids over the chunks ``cuts`` delimits, each given the previous one's end."""
    ts = np.asarray(ts, dtype=np.int64)
    # session_ids' precondition, which the job guarantees: times never decrease.
    assert np.all(np.diff(ts) >= 0), ts
    keys = np.arange(len(ts), dtype=np.int64)
    carry, ids = None, []
    for lo, hi in zip([0, *cuts], [*cuts, len(ts)]):
        got, carry = session_ids(ts[lo:hi], keys[lo:hi], window, carry)
        ids.extend(got.tolist())
    return ids


def traces():
    """Arrival patterns (in time order, as the job hands them to session_ids) that
    exercise the rule: gaps around the window, periodic (session chains that never
    meet), equal times, one request."""
    rng = random.Random(7)
    yield [0, 60, 120, 180, 240, 250, 400]
    yield [50, 99, 100, 120, 150, 199, 200, 201, 260]
    yield list(range(0, 5000, 50))
    yield [5] * 40
    yield [42]
    for _ in range(200):
        n = rng.randint(1, 300)
        t, ts = 0, []
        for _ in range(n):
            t += rng.choice([0, 1, 10, 40, 99, 100, 101, 250])
            ts.append(t)
        yield ts


@pytest.mark.parametrize("window", [1, 100, 1 << 62, 1 << 63])
def test_chunks_form_the_rules_sessions(window):
    rng = random.Random(window)
    for ts in traces():
        want = sessions_by_rule(ts, window)
        assert chunked(ts, window, []) == want, ts
        cuts = sorted(rng.sample(range(1, len(ts) + 1), min(len(ts), rng.randint(1, 6))))
        assert chunked(ts, window, cuts) == want, (ts, cuts)
        # A chunk whose end is fixed ends the same under any carried session.
        if end_is_fixed(np.asarray(ts), window):
            keys = np.arange(len(ts), dtype=np.int64)
            alone = session_ids(np.asarray(ts), keys, window, None)[1]
            carry = (-1, max(0, ts[0] - rng.randint(0, 200)))
            assert session_ids(np.asarray(ts), keys, window, carry)[1] == alone, ts


def test_the_open_session_carries_into_the_next_chunk():
    ids, end = session_ids(np.array([10, 20, 130], dtype=np.int64),
                           np.array([7, 8, 9], dtype=np.int64), 100, (3, 0))
    assert ids.tolist() == [3, 3, 9] and end == (9, 130)
    ids, end = session_ids(np.array([10, 20], dtype=np.int64),
                           np.array([7, 8], dtype=np.int64), 100, (3, 0))
    assert ids.tolist() == [3, 3] and end == (3, 0)


def test_flags_parse_as_the_cli_parses_them():
    assert parse_session("100us") == 100_000 and parse_session("1.5ms") == 1_500_000
    assert parse_session("request") is None
    with pytest.raises(ValueError, match="--session `fast`"):
        parse_session("fast")
    assert DEFAULT_PAIR_WINDOW == 13


def test_a_window_long_gap_fixes_a_chunks_end_whatever_the_carry():
    keys = np.arange(4, dtype=np.int64)
    ts = np.array([100, 150, 250, 260], dtype=np.int64)
    assert end_is_fixed(ts, 100)
    # Carried sessions that began before the chunk's first request (the precondition).
    for carry in [None, (-1, 0), (-1, 40), (-1, 60), (-2, 100)]:
        assert session_ids(ts, keys, 100, carry)[1] == (2, 250)
    assert not end_is_fixed(np.array([0, 60, 120, 180], dtype=np.int64), 100)
    assert not end_is_fixed(np.array([7], dtype=np.int64), 100)


def pairs_by_rule(sid, sector, sectors, block_sectors, window):
    """reblock's PairCounts, one session at a time: the session's distinct blocks in the
    order first requested, each paired with the next ``window``."""
    counts = {}
    for s in dict.fromkeys(sid.tolist()):
        seen = []
        for i in np.flatnonzero(sid == s):
            first = sector[i] // block_sectors
            last = (sector[i] + max(sectors[i], 1) - 1) // block_sectors
            seen += [b for b in range(first, last + 1) if b not in seen]
        for i, x in enumerate(seen):
            for y in seen[i + 1:i + 1 + window]:
                key = (min(x, y), max(x, y))
                counts[key] = counts.get(key, 0) + 1
    return counts


def test_pairs_counted_in_steps_of_whole_sessions_are_reblocks(monkeypatch):
    from reblock import spark as job

    rng = np.random.default_rng(3)
    for trial in range(300):
        n = int(rng.integers(1, 80))
        sid = np.sort(rng.integers(0, 10, n))
        sector, sectors = rng.integers(0, 60, n), rng.integers(0, 12, n)
        block_sectors, window = int(rng.choice([1, 2, 8])), int(rng.integers(1, 6))
        # Steps from one block (every session alone) to all of them at once.
        monkeypatch.setattr(job, "MAX_STEP_BLOCKS", int(rng.integers(1, 80)))
        first, per_row = job.block_spans(sector, sectors, block_sectors)
        steps = list(job._steps(sid, per_row))
        assert [b for b, _ in steps[1:]] == [e for _, e in steps[:-1]]
        assert steps[0][0] == 0 and steps[-1][1] == n
        got = {}
        for begin, end in steps:
            assert begin == 0 or sid[begin] != sid[begin - 1], "a session was cut"
            out = job.session_pair_counts(sid[begin:end], first[begin:end],
                                          per_row[begin:end], window)
            for a, b, c in out.itertuples(index=False):
                got[(a, b)] = got.get((a, b), 0) + c
        assert got == pairs_by_rule(sid, sector, sectors, block_sectors, window), trial


def batched(sid, sizes):
    """A partition's rows (sorted by session) cut into Arrow-like batches of ``sizes``."""
    import pandas as pd

    frame = pd.DataFrame({"sid": sid, "row": np.arange(len(sid))})
    bounds = np.r_[0, np.cumsum(sizes)]
    return [frame.iloc[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]


def test_batches_regroup_into_whole_sessions_in_order():
    from reblock.spark import whole_sessions

    rng = np.random.default_rng(11)
    for trial in range(300):
        n = int(rng.integers(0, 120))
        sid = np.sort(rng.choice([1, 2, 3, 50], n) if trial % 3 else rng.integers(0, 9, n))
        sizes = [0]
        while sum(sizes) < n:
            sizes.append(int(rng.integers(0, 25)))  # empty batches too
        sizes[-1] -= sum(sizes) - n
        out = list(whole_sessions(batched(sid, sizes)))
        rows = np.concatenate([f["row"].to_numpy() for f in out]) if out else np.empty(0)
        assert rows.tolist() == list(range(n)), trial
        assert all(len(f) for f in out)
        owner = {}
        for i, f in enumerate(out):
            for s in set(f["sid"].tolist()):
                assert owner.setdefault(s, i) == i, f"session {s} cut across frames"


def test_a_session_spanning_many_batches_is_copied_once(monkeypatch):
    """A long session (a wide --session on a dense trace) comes in many batches: its
    pieces are joined once, so rows copied stay linear in the rows (joining the held
    rows to every next batch copied 10,000 batches' worth here: quadratic)."""
    import pandas as pd

    from reblock.spark import whole_sessions

    copied = []
    join = pd.concat

    def counting(frames, **kw):
        frames = list(frames)
        copied.append(sum(len(f) for f in frames))
        return join(frames, **kw)

    monkeypatch.setattr(pd, "concat", counting)
    sid = np.r_[np.zeros(20_000, dtype=np.int64), [1, 1, 2]]
    out = list(whole_sessions(batched(sid, [100] * 200 + [3])))
    assert [len(f) for f in out] == [20_002, 1] and out[0]["sid"].iat[-1] == 1
    assert sum(copied) <= 2 * len(sid), sum(copied)
