"""One self-contained HTML file per run (or a side-by-side comparison of runs).

``society report DIR [DIR ...]`` reads each run directory (``summary.json``, ``plots/*.png``,
``metrics.parquet``) and writes ``report.html``: status, the headline table with 95%
intervals, every plot embedded as data (the file opens offline, mailed or archived), LLM
usage and failures, the full config and the versions. Nothing is fetched: no scripts, no
fonts, no stylesheets from elsewhere.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from sim_core.errors import ConfigError

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}.bad{color:#b00;font-weight:bold}.ok{color:#070}
figure{display:inline-block;margin:.5em}figure img{max-width:520px;border:1px solid #ddd}
pre{background:#f7f7f7;padding:.6em;overflow:auto;font-size:85%}
"""


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """A run directory's summary, or a one-line ConfigError naming what is wrong."""
    path = Path(run_dir) / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"'{run_dir}' is not a run directory: it has no summary.json") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"'{path}' is not a readable summary ({type(exc).__name__})") from None
    if not isinstance(summary, dict) or not {"scenario", "seed", "config"} <= summary.keys():
        raise ConfigError(f"'{path}' lacks scenario, seed or config; is it a run's summary?")
    return summary


def _e(x: Any) -> str:
    return html.escape(str(x))


def _num(x: Any) -> str:
    return "–" if x is None else f"{x:.4g}" if isinstance(x, float) else _e(x)


def _status(s: dict) -> str:
    status = s.get("status", "?")
    cls = "ok" if status == "completed" else "bad"
    extra = "".join(f"<li>{_e(r)}</li>" for r in s.get("degraded", []))
    if s.get("first_failure"):
        extra += f"<li>first failure: {_e(s['first_failure'])}</li>"
    if s.get("stop_reason") or s.get("error"):
        extra += f"<li>{_e(s.get('stop_reason') or s.get('error'))}</li>"
    return f'<p>status: <span class="{cls}">{_e(status)}</span></p>' + (
        f"<ul>{extra}</ul>" if extra else ""
    )


def _headline(runs: list[tuple[str, dict]]) -> str:
    names = sorted({m for _, s in runs for m in s.get("metrics", {})})
    head = "".join(f"<th>{_e(label)}<br>mean [95% CI]</th>" for label, _ in runs)
    rows = []
    for m in names:
        cells = []
        for _, s in runs:
            v = s.get("metrics", {}).get(m)
            if v is None:
                cells.append("<td>–</td>")
            else:
                lo, hi = (v.get("ci95") or [None, None])[:2]
                cells.append(f"<td>{_num(v.get('mean'))} [{_num(lo)}, {_num(hi)}]</td>")
        rows.append(f'<tr><td class="l">{_e(m)}</td>{"".join(cells)}</tr>')
    return f'<table><tr><th class="l">metric</th>{head}</tr>{"".join(rows)}</table>'


def _params(runs: list[tuple[str, dict]]) -> str:
    """Every parameter, one column per run; rows where runs differ come first."""
    keys = sorted({k for _, s in runs for k in s["config"]})
    keys.sort(key=lambda k: len({json.dumps(s["config"].get(k)) for _, s in runs}) == 1)
    head = "".join(f"<th>{_e(label)}</th>" for label, _ in runs)
    getters = [("seed", lambda s: s.get("seed")), ("replicates", lambda s: s.get("replicates")),
               ("llm", lambda s: s.get("options", {}).get("llm", "–"))]  # fmt: skip
    getters += [(k, lambda s, k=k: s["config"].get(k, "–")) for k in keys]
    rows = [
        f'<tr><td class="l">{_e(k)}</td>'
        + "".join(f"<td>{_e(get(s))}</td>" for _, s in runs)
        + "</tr>"
        for k, get in getters
    ]
    return f'<table><tr><th class="l">parameter</th>{head}</tr>{"".join(rows)}</table>'


def _plots(run_dir: Path) -> str:
    figs = []
    for png in sorted((run_dir / "plots").glob("*.png")):
        data = base64.b64encode(png.read_bytes()).decode()
        figs.append(f'<figure><img alt="{_e(png.stem)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{_e(png.stem)}</figcaption></figure>")  # fmt: skip
    return "".join(figs) or "<p>no plots</p>"


def _llm(s: dict) -> str:
    llm = s.get("llm")
    if not llm:
        return "<p>no LLM calls</p>"
    kinds = (
        ", ".join(f"{_e(k)} {n}" for k, n in sorted(llm.get("failure_kinds", {}).items())) or "none"
    )
    return (f"<p>{llm.get('requests', 0)} requests, {llm.get('failures', 0)} failed "
            f"({kinds}), {llm.get('fallbacks', 0)} fallbacks, {llm.get('budget_stopped', 0)} "
            "stopped by the budget</p>")  # fmt: skip


def write_report(run_dirs: list[str | Path], out: str | Path | None = None) -> Path:
    """Write the HTML report of one run (into its directory) or a comparison of several
    (into the first one's directory unless ``out``); returns its path."""
    if not run_dirs:
        raise ConfigError("report needs at least one run directory")
    dirs = [Path(d) for d in run_dirs]
    runs = [(d.name, load_run(d)) for d in dirs]
    title = (
        runs[0][1]["scenario"]
        if len(runs) == 1
        else "comparison of " + ", ".join(n for n, _ in runs)
    )
    parts = [f"<h1>{_e(title)}</h1>"]
    parts += [f"<h2>headline metrics</h2>{_headline(runs)}", f"<h2>parameters</h2>{_params(runs)}"]
    for d, (label, s) in zip(dirs, runs, strict=True):
        parts.append(f"<h2>{_e(label)}: {_e(s['scenario'])}, seed {_e(s['seed'])}</h2>")
        parts.append(_status(s) + f"<p>wall time: {_num(s.get('wall_time_s'))} s</p>")
        parts.append(f"<h3>LLM usage</h3>{_llm(s)}<h3>plots</h3>{_plots(d)}")
        parts.append(
            f"<h3>versions</h3><pre>{_e(json.dumps(s.get('versions', {}), indent=1))}</pre>"
        )
    doc = (f'<!doctype html><html><head><meta charset="utf-8"><title>{_e(title)}</title>'
           f"<style>{_STYLE}</style></head><body>{''.join(parts)}</body></html>")  # fmt: skip
    path = Path(out) if out is not None else dirs[0] / "report.html"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(doc)
    tmp.replace(path)
    return path
