"""society report: one self-contained HTML file per run, or runs side by side."""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

import scenarios


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("report")
    kw = dict(seed=1, replicates=2, population=40, steps=6, eval_every=3, plots=True)
    a = scenarios.run("skill-society", out=base / "a", sharing="none", **kw)
    b = scenarios.run("skill-society", out=base / "b", sharing="neighbours", **kw)
    return a, b


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "society.cli", *args], capture_output=True, text=True
    )


def test_one_run_report_is_self_contained(runs):
    a, _ = runs
    done = _cli("report", str(a.run_dir))
    assert done.returncode == 0, done.stderr
    page = (a.run_dir / "report.html").read_text()
    parser = _Tags()
    parser.feed(page)
    imgs = [attrs for tag, attrs in parser.tags if tag == "img"]
    assert len(imgs) == len(list((a.run_dir / "plots").glob("*.png"))) > 0
    assert all(i["src"].startswith("data:image/png;base64,") for i in imgs)  # opens offline
    assert not [t for t, _ in parser.tags if t in ("script", "link", "iframe")]
    assert not re.search(r"(src|href)=\"https?:", page)
    mean = a.summary["metrics"]["heldout_gain"]["mean"]
    assert "heldout_gain" in page and f"{mean:.4g}" in page  # the headline with its interval
    assert "sharing" in page and "jax" in page and "completed" in page  # config, versions, status


def test_runs_side_by_side_put_differing_parameters_first(runs, tmp_path):
    a, b = runs
    out = tmp_path / "compare.html"
    done = _cli("report", str(a.run_dir), str(b.run_dir), "--out", str(out))
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    params = page[page.index("<h2>parameters</h2>") :]
    first = re.findall(r'<td class="l">([^<]+)</td>', params)
    assert first.index("sharing") < first.index("population")  # differs, so listed first
    for run in (a, b):
        assert f"{run.summary['metrics']['heldout_gain']['mean']:.4g}" in page


def test_report_of_a_non_run_is_one_line(tmp_path):
    done = _cli("report", str(tmp_path))
    assert (
        done.returncode == 2
        and done.stderr.startswith("error: ")
        and "no summary.json" in done.stderr
    )
