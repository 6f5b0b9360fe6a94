"""Traces: a result saved as JSON loads back identical; malformed or newer traces are refused clearly."""
from __future__ import annotations

import copy
import gzip
import json

import pytest

pd = pytest.importorskip("pandas", reason="results need pandas (the lab extra)")

from harness_results import ITER, make_result
from rknnlab.experiment import TraceError, load, save, trace


@pytest.fixture()
def saved(tmp_path):
    r = make_result(crash=True)
    path = tmp_path / "t.json"
    save(r, path)
    return r, path


def test_round_trip_keeps_every_frame(saved):
    r, path = saved
    back = load(path)
    assert back.meta == r.meta
    assert back.variants == r.variants
    for frame in ("calls", "iterations", "samples", "summary", "phases"):
        pd.testing.assert_frame_equal(getattr(back, frame), getattr(r, frame), check_dtype=False)
    assert back["crashy"].status == "crashed" and "SIGSEGV" in back["crashy"].error
    assert back.describe() == r.describe()


def test_trace_is_plain_versioned_json(saved):
    _, path = saved
    data = json.loads(path.read_text())
    assert data["schema"] == "rknnlab.trace" and data["schema_version"] == 1
    meta = data["meta"]
    for key in ("backend", "source", "board", "runtime_versions", "model", "rknnlab_version", "host",
                "parameters"):
        assert key in meta
    assert meta["model"]["report_sha256"] and meta["parameters"]["iterations"] == ITER
    assert "NaN" not in path.read_text()
    assert not path.read_bytes().startswith(b"\x80")  # never pickle


def test_gzip_traces(tmp_path):
    r = make_result()
    path = tmp_path / "t.json.gz"
    save(r, path)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert load(path).variants == r.variants


def _write(tmp_path, data, name="bad.json"):
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def _good(tmp_path):
    return json.loads(save(make_result(), tmp_path / "good.json").read_text())


def test_newer_schema_is_refused_with_a_clear_message(tmp_path):
    data = _good(tmp_path)
    data["schema_version"] = 2
    with pytest.raises(TraceError, match="newer rknnlab.*version 2.*reads version 1.*upgrade"):
        load(_write(tmp_path, data))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema="something.else"), "not an rknnlab trace"),
    (lambda d: d.pop("meta"), "meta"),
    (lambda d: d["meta"].pop("backend"), "backend"),
    (lambda d: d["meta"]["model"].update(sha256="xyz"), "sha256|does not match"),
    (lambda d: d["meta"]["parameters"].update(iterations=0), "iterations|minimum"),
    (lambda d: d["variants"][0].update(status="weird"), "status|weird"),
    (lambda d: d["variants"][0]["calls"]["duration_ns"].pop(), "different lengths"),
    (lambda d: d["variants"][0]["samples"].update(rss_kb="lots"), "rss_kb|array"),
    (lambda d: d["variants"][0]["calls"].pop("function"), "lacks the column"),
    (lambda d: d["variants"][1].update(name=d["variants"][0]["name"]), "share a name"),
    (lambda d: d.update(schema_version="1"), "integer"),
])
def test_malformed_traces_are_refused(tmp_path, mutate, message):
    data = _good(tmp_path)
    mutate(data)
    with pytest.raises(TraceError, match=message):
        load(_write(tmp_path, data))


def test_structural_check_without_jsonschema(tmp_path, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_jsonschema(name, *a, **k):
        if name == "jsonschema":
            raise ImportError("no jsonschema")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_jsonschema)
    data = _good(tmp_path)
    trace.validate(copy.deepcopy(data))  # a good trace passes
    data["meta"]["parameters"].pop("seed")
    with pytest.raises(TraceError, match="seed"):
        trace.validate(data)


def test_not_json_and_missing_files(tmp_path):
    with pytest.raises(TraceError, match="not a JSON trace"):
        load(_write(tmp_path, "{not json"))
    with pytest.raises(TraceError, match="no trace file"):
        load(tmp_path / "nope.json")
    p = tmp_path / "z.json"
    p.write_bytes(gzip.compress(b"[1, 2]"))
    with pytest.raises(TraceError, match="not an rknnlab trace"):
        load(p)


def test_describe_in_words():
    r = make_result(crash=True)
    text = r.describe()
    assert "leaky: 1.30 ms per iteration" in text
    # 20 samples over 20 iterations: too few to fit a slope with its uncertainty,
    # even for the leaky one; the verdict says how much longer to run
    assert ("RSS: cannot tell yet: run about 100 more iterations (20 samples over 20 iterations"
            in text)
    assert "flat: 1.30 ms" in text and "Memory grows in" not in text
    assert "crashy: CRASHED — died with SIGSEGV" in text
    assert "Cannot tell yet whether memory grows in: flat, leaky" in text
    # 20 measured iterations: too few to tell two timings apart, and the line says so
    assert ("leaky vs flat: 1.00x the time per iteration: cannot tell apart (20 measured "
            "iterations; comparing needs at least 100)" in text)
    html = r._repr_html_()
    assert "<table" in html and "crashy" in html


def test_the_course_traces_load():
    """Recorded traces shipped in data/traces/ must stay readable by this rknnlab."""
    from pathlib import Path
    traces = sorted((Path(__file__).resolve().parents[1] / "data" / "traces").glob("*.json*"))
    if not traces:
        pytest.skip("no traces in data/traces/")
    import gzip
    import json

    from rknnlab.pipeline import SteadyState
    for path in traces:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as f:
            kind = json.load(f).get("format")
        if kind == "rknnlab.pipeline.steady/1":  # chapter 6's long run: not a rknnlab.run trace
            steady = SteadyState.load(path)
            assert steady.table() is not None, path
            continue
        r = load(path)
        assert r.variants and len(r.summary) == len(r.variants), path
