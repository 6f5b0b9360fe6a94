"""rknnlab.plot's chapter 0 helpers: the two-panel RSS figure, the MemFree table, the
comparison of two runs' slopes; each checked against runs whose numbers are known."""
from __future__ import annotations

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="rknnlab.plot needs matplotlib (the lab extra)")
pytest.importorskip("pandas", reason="results need pandas (the lab extra)")
matplotlib.use("Agg")

from harness_results import ITER, make_result  # noqa: E402
from rknnlab import plot  # noqa: E402
from rknnlab.checks import ch00  # noqa: E402
from rknnlab.experiment.result import Result  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    import matplotlib.pyplot as plt
    plt.close("all")


def _run(leaks, memfree_mib=0, seed=0):
    """A made-up run: one variant per leak (bytes per iteration), named v0, v1, ..."""
    rng = np.random.default_rng(seed)
    runs = [ch00._made_up_run(rng, f"v{k}", leak, 0, memfree_mib) for k, leak in enumerate(leaks)]
    return Result({"source": "made up for a test"}, runs)


def test_rss_life_and_loop_draws_both_views():
    result = make_result()
    fig = plot.rss_life_and_loop(result)
    top, bottom = fig.axes
    s = result.samples
    for ax in (top, bottom):
        assert result.source in ax.get_title(loc="left")
    lines = {ln.get_label(): ln for ln in top.get_lines() if not ln.get_label().startswith("_")}
    leaky = s[s["variant"] == "leaky"]
    first = leaky[leaky["stage"] == "measure"]["rss_kb"].iloc[0]
    np.testing.assert_allclose(lines["leaky"].get_ydata(), (leaky["rss_kb"] - first) / 1024)
    low = {ln.get_label(): ln for ln in bottom.get_lines() if not ln.get_label().startswith("_")}
    assert low["leaky"].get_xdata().max() == ITER + 1          # measured iterations only (2 ... 21)
    assert low["leaky"].get_ydata()[-1] == pytest.approx(4.0 * (ITER - 1) / 1024)
    assert "measured iteration" in bottom.get_ylabel()


def test_memfree_table_has_the_known_numbers():
    leak = 12_000
    result = _run([leak, 0], memfree_mib=-400)
    table = plot.memfree_table(result)
    assert list(table.index) == ["v0", "v1"]
    assert (table["readings"] == ch00._SAMPLES).all()
    # both MemFree lines fall by 400 MiB over the loop (plus a random walk of about 30 MiB)
    assert table["memfree_drop_mib"].between(300, 500).all()
    assert table["memfree_range_mib"].min() >= table["memfree_drop_mib"].min() - 1
    growth = leak * ch00._ITERATIONS / 2 ** 20
    assert table.loc["v0", "heap_growth_mib"] == pytest.approx(growth, rel=0.02)
    assert table.loc["v0", "heap_growth_pm_mib"] < 0.05 * growth
    assert abs(table.loc["v1", "heap_growth_mib"]) < 0.1       # the floor only: 30 B/iteration


def test_growth_comparison_overlap():
    a = _run([12_000, 0], seed=1)
    b = _run([12_000, 0], seed=2)
    c = _run([13_000, 0], seed=3)
    same = plot.growth_comparison(a, b)
    assert list(same.index) == ["v0", "v1"] and same.loc["v0", "agree"]
    assert same.loc["v0", "first"] == a.summary.loc["v0", "heap_slope_bytes_per_iter"]
    assert same.loc["v0", "second_pm"] == b.summary.loc["v0", "heap_slope_pm_bytes"]
    assert not plot.growth_comparison(a, c).loc["v0", "agree"]
    assert plot.growth_comparison(a, a)["agree"].all()
    with pytest.raises(ValueError):
        plot.growth_comparison(a, b, "pss")
