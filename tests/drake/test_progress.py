"""Line progress: at most one line per interval, always one at the end of a stage."""

from hypothesis import given
from hypothesis import strategies as st

from drake.progress import LineProgress, format_seconds


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_wrap_says_a_line_per_interval_and_at_the_last_item():
    clock, said = FakeClock(), []
    wrap = LineProgress(said.append, every=10, clock=clock).wrap("building", "shard")
    for _ in wrap(range(12), 12):
        clock.now += 3  # each shard takes 3 s
    assert said == ["building: 4/12 shards (12 s)", "building: 8/12 shards (24 s)",
                    "building: 12/12 shards (36 s)"]


@given(st.lists(st.floats(0, 20), min_size=1, max_size=60), st.floats(1, 30))
def test_no_gap_between_lines_exceeds_the_interval_plus_one_step(steps, every):
    """The bound the quickstart relies on: a line at least every `every` s plus one item."""
    clock, times = FakeClock(), []
    lines = LineProgress(lambda s: times.append(clock.now), every=every, clock=clock)
    for step in lines.wrap("x", "item")(iter(steps), len(steps)):
        clock.now += step  # the wrapper says its line after the caller's work on an item
    last = 0.0
    for t in times:
        assert t - last <= every + max(steps) + 1e-9  # float sums
        last = t
    assert times[-1] == clock.now  # the last item always gets its line


def test_format_seconds():
    assert [format_seconds(s) for s in (0.4, 42, 59.6, 61, 3725)] == [
        "0 s", "42 s", "1 min 00 s", "1 min 01 s", "62 min 05 s"]


def test_keepalive_says_the_status_while_the_block_runs_and_stops_after():
    import threading

    said, beat = [], threading.Event()

    def say(line):
        said.append(line)
        beat.set()

    lines = LineProgress(say, every=0.02)
    with lines.keepalive(lambda: "still building"):
        assert beat.wait(30)
    count = len(said)
    threading.Event().wait(0.1)
    assert said[0] == "still building" and len(said) == count
