"""Stored GPU results: only a real run's figures, with provenance, are ever shown (helpers.results)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest

from helpers import results

from support.layout import ROOT  # noqa: E402
#: Test data, never committed under results/: a run's provenance as `make gpu-check` writes it.
PROVENANCE = {"device": "Test GPU 9000", "driver": "999.1", "torch": "2.11.0+cu130", "cuda": "13.0",
              "python": "3.12.3", "date": "2026-12-01T10:00:00+00:00", "command": "make gpu-check"}


def stored_01(tmp_path: Path, **changes) -> Path:
    figures = {"cpu_matmul_best": 9.5e10, "gpu_matmul_best": 5.0e13, "gpu_matmul_best_n": 4096,
               "speedup_largest": 412.0, "bench_report": "matrix product, float32 ..."}
    return results.write("01_why_gpus", figures, {**PROVENANCE, **changes}, tmp_path,
                         skipped={"crossover_n": "the GPU did not win at every size"})


def test_a_stored_figure_is_shown_with_its_device_versions_date_and_command(tmp_path):
    path = stored_01(tmp_path)
    assert path == tmp_path / "test-gpu-9000" / "01_why_gpus.json"
    text = results.report("01_why_gpus", ["cpu_matmul_best", "gpu_matmul_best", "crossover_n", "bench_report"],
                          mine={"cpu_matmul_best": 2.0e10}, root=tmp_path)
    assert "this machine" in text and "Test GPU 9000" in text
    assert "20 GFLOP/s" in text and "95 GFLOP/s" in text and "50 TFLOP/s" in text
    assert "the GPU did not win at every size" in text  # a skipped figure says why, no stand-in number
    assert ("measured on Test GPU 9000, torch 2.11.0+cu130 (CUDA 13.0, driver 999.1), Python 3.12.3, "
            "2026-12-01, by `make gpu-check`") in text
    assert "matrix product, float32 ..." in text  # a text figure is shown verbatim


def test_nothing_stored_says_so_and_shows_no_number(tmp_path):
    text = results.report("05_mixed_precision", ["step_fp32", "step_bf16"], mine={"step_fp32": 0.01}, root=tmp_path)
    assert text.startswith("No stored GPU result for 05_mixed_precision")
    assert not re.search(r"\d", text.replace("05_mixed_precision", ""))
    assert results.stored("05_mixed_precision", root=tmp_path) == []


@pytest.mark.parametrize("field", results.PROVENANCE_FIELDS)
def test_a_file_without_complete_provenance_is_refused(tmp_path, field):
    path = stored_01(tmp_path)
    data = json.loads(path.read_text())
    data["provenance"][field] = " "
    path.write_text(json.dumps(data))
    with pytest.raises(results.ResultsError, match=f"no {field}"):
        results.report("01_why_gpus", ["gpu_matmul_best"], root=tmp_path)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["figures"].update(typed_in={"value": 1, "unit": "x"}), "not one chapter 01_why_gpus stores"),
    (lambda d: d["figures"]["gpu_matmul_best"].update(unit="GB/s"), "expected 'FLOP/s'"),
    (lambda d: d.update(schema=0), "schema 0"),
    (lambda d: d.update(chapter="99_nope"), "unknown chapter"),
])
def test_a_file_the_course_did_not_write_is_refused(tmp_path, change, message):
    path = stored_01(tmp_path)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(results.ResultsError, match=message):
        results.load(path)


def test_a_cpu_rehearsal_of_the_check_is_never_shown(tmp_path):
    stored_01(tmp_path, device="CPU rehearsal (Intel Xeon)")
    with pytest.raises(results.ResultsError, match="rehearsal"):
        results.report("01_why_gpus", ["gpu_matmul_best"], root=tmp_path)


def test_a_chapter_cannot_ask_for_a_figure_no_run_produces(tmp_path):
    with pytest.raises(results.ResultsError, match="stores no figure"):
        results.report("01_why_gpus", ["speedup_from_the_brochure"], root=tmp_path)


def test_results_are_found_through_course_results_or_beside_the_helpers(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS", str(tmp_path))
    assert results.results_dir() == tmp_path
    monkeypatch.delenv("COURSE_RESULTS")
    assert results.results_dir() == ROOT / "results"


def test_units_format_as_the_chapters_print_them():
    assert results.format_value(0.0123, "s") == "12.3 ms"
    assert results.format_value(3.2e12, "B/s") == "3.2 TB/s"
    assert results.format_value(64 * 2**20, "B") == "64.00 MiB"
    assert results.format_value(412.0, "x") == "412x"
    assert results.format_value(335_000_000_000, "FLOP") == "335 GFLOP"  # a count, not a raw 12-digit integer
    assert results.format_value(None, "s") == "-"


# --------------------------------------------------------------------------- what is committed


def test_every_committed_results_file_is_a_real_gpu_run_with_provenance():
    folder = ROOT / "results"
    stray = [p for p in folder.rglob("*") if p.is_file() and p.name != "README.md"
             and not (p.suffix == ".json" and p.parent.parent == folder)]
    assert not stray, f"results/ holds only README.md and <gpu>/<chapter>.json: {stray}"
    for path in folder.glob("*/*.json"):
        stored = results.load(path)  # refuses incomplete provenance or unknown figures
        assert path.parent.name == results.slug(stored.device), f"{path}: not in its device's folder"
        assert "cpu" not in stored.device.lower() and stored.device != PROVENANCE["device"], path


def _show_calls(source: str) -> list[ast.Call]:
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("show", "report") and getattr(n.func.value, "id", "") == "results"]


def chapter_show_calls() -> dict[str, list[ast.Call]]:
    calls = {}
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        calls[path.stem] = [c for cell in nb.cells if cell.cell_type == "code" and "results." in cell.source
                            for c in _show_calls(cell.source)]
    return calls


def test_every_stored_figure_a_chapter_shows_is_one_the_gpu_check_writes():
    """No number can be typed in: chapters show stored figures only through results.show, by key."""
    calls = chapter_show_calls()
    shown = {ch for ch, found in calls.items() if found}
    assert shown >= {"01_why_gpus", "02_devices", "03_memory", "04_dataloader", "05_mixed_precision",
                     "07_troubleshooting"}, f"chapters showing stored GPU results: {sorted(shown)}"
    for chapter, found in calls.items():
        for call in found:
            stored_chapter = ast.literal_eval(call.args[0])
            keys = ast.literal_eval(call.args[1])
            assert set(keys) <= set(results.FIGURES[stored_chapter]), (chapter, keys)


TYPED_GPU_NUMBER = re.compile(r"\b\d[\d.,]*\s*(?:[kMGTP]?FLOP/?S|[kMGT]i?B/s|x faster|× faster|times faster)", re.I)


@pytest.mark.parametrize("text, typed", [("an H100 reaches 989 TFLOP/s", True), ("3.35 TB/s of bandwidth", True),
                                         ("runs 12x faster", True), ("the table measured above", False)])
def test_the_typed_number_rule_catches_a_typed_figure(text, typed):
    assert bool(TYPED_GPU_NUMBER.search(text)) is typed


def test_no_chapter_types_a_speed_or_bandwidth_into_its_text():
    found = []
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "markdown":
                found += [f"{path.stem} cell {i}: {m.group(0)!r}" for m in TYPED_GPU_NUMBER.finditer(cell.source)]
    assert not found, "a figure typed into the text instead of measured or stored: " + "; ".join(found)


def test_with_nothing_stored_the_why_is_printed_once_per_chapter(tmp_path, capsys, monkeypatch):
    """...except by the cell that printed it, run again (its new output replaces the paragraph)."""
    monkeypatch.setattr(results, "_TOLD_NOTHING_STORED", {})
    assert results.show("05_mixed_precision", ["step_fp32"], root=tmp_path) == []
    for _ in range(2):
        assert results.show("05_mixed_precision", ["peak_bf16"], root=tmp_path) == []
    results.show("03_memory", ["oom_message"], root=tmp_path)
    results.show("05_mixed_precision", ["step_fp32"], root=tmp_path)
    out = capsys.readouterr().out.splitlines()
    told = "this copy of the course holds no figure measured on a real GPU"
    assert out[0].startswith("No stored GPU result for 05_mixed_precision: " + told)
    assert out[1:3] == ["No stored GPU result for 05_mixed_precision here either (see above)."] * 2
    assert out[3].startswith("No stored GPU result for 03_memory: " + told)
    assert out[4].startswith("No stored GPU result for 05_mixed_precision: " + told)
