"""``trace import --sacct`` on real sacct output, captured from a dev cluster with slurmdbd (Slurm 22.05.8,
``tests/history/data/``: jobs 1-13 of one session; how each was made is in ``data/README.md``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmplan.cli import main
from slurmplan.history.convert import ImportReport, to_trace
from slurmplan.history.sacct import parse_sacct
from slurmplan.history.speeds import default_speeds, load_speeds
from slurmplan.sim.trace import read_trace

DATA = Path(__file__).parent / "data"
GPU_JOBS = [1, 2, 3, 5, 7, 8, 9, 11, 12, 13]


def _parsed(name: str):
    return parse_sacct((DATA / name).read_text())


def test_json_golden_records():
    parsed = _parsed("all.json")
    assert parsed.fmt == "json" and not parsed.skipped
    by_id = {j.job_id: j for j in parsed.jobs}
    assert sorted(by_id) == [1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13]
    multi = by_id[3]  # two a100 nodes, 4 GPUs each; started after job 1 freed an a100 node
    assert (multi.gpus, multi.gpu_type, multi.nodes, multi.end - multi.start) == (8, "a100", 2, 5.0)
    assert multi.start > by_id[1].start
    assert by_id[4].gpus == 0  # CPU-only
    assert by_id[8].gpu_type == "t4"  # asked for an untyped GPU: the type comes from the allocation
    assert (by_id[9].state, by_id[9].time_limit_s, by_id[9].end - by_id[9].start) == ("TIMEOUT", 60.0, 63.0)
    assert (by_id[7].account, by_id[7].user, by_id[7].partition) == ("beta", "slurmplan-t1", "debug")
    assert by_id[12].name == "weird|name"
    assert by_id[13].admin_comment.startswith("slurmplan:model=bert-large;gpus=2;batch=64;class=guaranteed ||")


def test_parsable2_reads_the_same_jobs_as_json():
    js = {j.job_id: j for j in _parsed("all.json").jobs}
    parsed = _parsed("site.txt")
    assert parsed.fmt == "parsable2" and not parsed.skipped
    for job in parsed.jobs:
        other = js[job.job_id]
        for field in ("state", "submit", "start", "end", "gpus", "gpu_type", "nodes", "account", "user"):
            assert getattr(job, field) == getattr(other, field), (job.job_id, field)
        assert job.admin_comment == other.admin_comment  # the decision's own '|' joined back
    assert sorted(j.job_id for j in parsed.jobs) == sorted(js)


def test_parsable2_skips_lines_a_pipe_makes_ambiguous_and_ignores_steps():
    parsed = _parsed("all.txt")  # JobName and Comment too: a '|' in either cannot be placed
    skipped = {s.job_id: s for s in parsed.skipped}
    assert set(skipped) == {"11", "12", "13"} and all(s.field == "line" for s in skipped.values())
    assert "'|'" in skipped["12"].why
    steps = _parsed("with_steps.txt")
    assert steps.steps > 0 and sorted(j.job_id for j in steps.jobs) == [1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13]


def test_conversion_counts_every_record_somewhere():
    report = ImportReport()
    jobs = to_trace(_parsed("all.json").jobs, default_speeds(), report)
    assert [j.job_id for j in jobs] == GPU_JOBS
    assert report.cpu_only == [4] and report.records == 11 and report.kept == 10
    model = {j.job_id: j for j in jobs}[13]
    assert model.model == "bert-large" and model.extra_hints == {"global_batch": 64}
    assert model.job_class.value == "guaranteed" and model.gpu_type == "v100" and model.gpus == 2
    bad_hints = {j.job_id: j for j in jobs}[11]  # 'global_batch' is no hint key: a measured job, not a failure
    assert bad_hints.is_measured_job and bad_hints.speeds["a100"] > bad_hints.speeds["v100"] == 1.0
    first = jobs[0]
    assert first.arrival_s == 0.0 and first.duration_s == 4.0 and first.time_limit_s == 600.0


def test_never_started_and_still_running_jobs_are_counted_not_dropped():
    report = ImportReport()
    assert to_trace(_parsed("never.json").jobs, default_speeds(), report) == []
    assert report.never_started == [6, 10]
    report = ImportReport()
    jobs = to_trace(_parsed("running.json").jobs, default_speeds(), report)
    assert report.unfinished == [9] and 9 not in [j.job_id for j in jobs]


def test_a_malformed_record_is_skipped_with_its_id_and_field():
    doc = json.loads((DATA / "all.json").read_text())
    doc["jobs"][1]["time"]["submission"] = "yesterday"
    doc["jobs"][2]["tres"]["allocated"] = "gpu=8"
    parsed = parse_sacct(json.dumps(doc))
    assert [(s.job_id, s.field) for s in parsed.skipped] == [("2", "time.submission"), ("3", "tres.allocated")]
    assert len(parsed.jobs) == 9


def test_cli_writes_the_trace_and_reports(tmp_path: Path, capsys):
    out = tmp_path / "site.jsonl"
    assert main(["trace", "import", "--sacct", "--from", str(DATA / "all.json"), "--out", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["jobs"] == 10 and info["cpu_only"] == 1 and info["model_jobs"] == 1
    assert {r["gpu_type"]: r["source"].split()[0] for r in info["speeds"]}["v100"] == "measured"
    jobs = read_trace(out)
    assert [j.job_id for j in sorted(jobs, key=lambda j: j.job_id)] == GPU_JOBS
    assert list(tmp_path.iterdir()) == [out]  # no temporary file left beside it


def test_an_empty_range_says_so_and_leaves_an_existing_trace_alone(tmp_path: Path, capsys):
    out = tmp_path / "site.jsonl"
    out.write_text("previous\n")
    for name in ("empty.json", "empty.txt"):
        assert main(["trace", "import", "--sacct", "--from", str(DATA / name), "--out", str(out)]) == 1
        assert "no records" in capsys.readouterr().err
    assert out.read_text() == "previous\n" and list(tmp_path.iterdir()) == [out]


def test_speed_table_override_and_bad_values(tmp_path: Path, capsys):
    site = tmp_path / "speeds.yaml"
    site.write_text("a100: 2.5\nmi250: 1.7\n")
    table = load_speeds(site)
    assert table.speed("a100") == 2.5 and table.speed("mi250") == 1.7 and table.speed("v100") == 1.0
    assert table.sources["a100"] == "site (speeds.yaml)"
    site.write_text("a100: fast\n")
    args = ["trace", "import", "--sacct", "--from", str(DATA / "all.json"), "--out", str(tmp_path / "t.jsonl")]
    assert main([*args, "--speeds", str(site)]) == 1
    err = capsys.readouterr().err
    assert "--speeds a100" in err and "fast" in err and not (tmp_path / "t.jsonl").exists()


@pytest.mark.parametrize("value", ["2026-13", "last week"])
def test_bad_times_are_refused_before_sacct_runs(tmp_path: Path, capsys, value: str):
    assert main(["trace", "import", "--sacct", "--start", value, "--out", str(tmp_path / "t.jsonl")]) == 1
    assert "--start" in capsys.readouterr().err


def test_imported_trace_simulates_on_the_cluster_it_came_from(tmp_path: Path, capsys):
    out = tmp_path / "site.jsonl"
    assert main(["trace", "import", "--sacct", "--from", str(DATA / "site.txt"), "--out", str(out)]) == 0
    capsys.readouterr()
    args = ["simulate", "--trace", str(out), "--cluster", "a100:2x4,v100:2x4,t4:2x2", "--policy", "slurm_fifo"]
    assert main([*args, "--json", "--tick", "0"]) == 0
    (summary,) = json.loads(capsys.readouterr().out)
    assert summary["jobs"] == 10 and summary["finished"] == 10


def _as_v0042(value: object, key: str = "") -> object:
    """A 22.05 record in the shapes DESIGN.md lists for Slurm 24.11's JSON (states a list, numbers as
    ``{set, infinite, number}``). Made from the captured record, not captured itself: no 24.11 slurmdbd here."""
    if isinstance(value, dict):
        if key == "state":
            return {**value, "current": [value["current"]]}
        return {k: _as_v0042(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_v0042(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and key in ("limit", "start", "end", "count"):
        return {"set": True, "infinite": False, "number": value}
    return value


def test_later_json_shapes_read_the_same():
    doc = json.loads((DATA / "all.json").read_text())
    old = parse_sacct(json.dumps(doc))
    new = parse_sacct(json.dumps(_as_v0042(doc)))
    assert not new.skipped and new.jobs == old.jobs
    unlimited = _as_v0042(doc)
    unlimited["jobs"][0]["time"]["limit"] = {"set": True, "infinite": True, "number": 0}
    assert parse_sacct(json.dumps(unlimited)).jobs[0].time_limit_s is None
