"""``society serve``: a live dashboard of running and finished runs, in the browser.

An aiohttp server on 127.0.0.1 serves one self-contained page (inline JS and SVG, nothing
fetched from elsewhere) and a small JSON API over run directories:

- ``GET /api/runs``: every run with its status, headline metrics and progress;
- ``GET /api/runs/{id}``: one run, with its summary (config, versions, LLM use);
- ``GET /api/runs/{id}/events``: server-sent events: ``rows`` (new points of each recorded
  metric, the mean over replicates and labels at each time, read from new Parquet parts),
  ``progress`` (the run's progress.json), ``status`` (the run's info when it changes) and
  ``end`` once the run has finished and every row was sent;
- ``GET /api/runs/{id}/plots/{file}``: a PNG of the run (network view, artifact lineage).

A run whose summary says ``running`` but whose process is gone shows as ``interrupted``.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from pathlib import Path
from typing import Any

from aiohttp import web

from sim_core.progress import live_status, read_progress

POLL_S = 0.5
FINAL = ("completed", "stopped", "degraded", "failed", "interrupted")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class Runs:
    """The run directories shown: the given ones, or every run under ``root``."""

    def __init__(self, dirs: list[Path] | None = None, root: Path = Path("runs")):
        self.dirs = [Path(d) for d in dirs] if dirs else None
        self.root = Path(root)

    def all(self) -> dict[str, Path]:
        if self.dirs is not None:
            paths = self.dirs
        elif self.root.is_dir():
            paths = [
                p
                for p in self.root.iterdir()
                if (p / "summary.json").exists() or (p / "progress.json").exists()
            ]
            paths.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        else:
            paths = []
        out: dict[str, Path] = {}
        for p in paths:
            key, i = p.name or "run", 1
            while key in out:
                i += 1
                key = f"{p.name}-{i}"
            out[key] = p
        return out

    def get(self, run_id: str) -> Path:
        path = self.all().get(run_id)
        if path is None:
            raise web.HTTPNotFound(text=f"no run '{run_id}'")
        return path


def run_info(run_id: str, path: Path) -> dict[str, Any]:
    summary = _read_json(path / "summary.json") or {}
    progress = read_progress(path)
    plots = (
        sorted(p.name for p in (path / "plots").glob("*.png")) if (path / "plots").is_dir() else []
    )
    headline = {
        k: v.get("mean") for k, v in (summary.get("metrics") or {}).items() if isinstance(v, dict)
    }
    return {
        "id": run_id,
        "path": str(path),
        "scenario": summary.get("scenario") or (progress or {}).get("scenario") or "?",
        "seed": summary.get("seed"),
        "status": live_status(summary.get("status"), progress),
        "headline": {
            k: (v if isinstance(v, int | float) and math.isfinite(v) else None)
            for k, v in headline.items()
        },
        "wall_time_s": summary.get("wall_time_s"),
        "error": summary.get("error") or summary.get("stop_reason"),
        "progress": progress,
        "plots": plots,
        "network": [p for p in plots if "network" in p],
        "lineage": [p for p in plots if "lineage" in p],
    }


def _aggregate(
    parts: list[Path], acc: dict[str, dict[float, list[float]]]
) -> dict[str, list[list[float]]]:
    """Add the parts' rows to ``acc`` (metric -> time -> [sum, count]); return the changed
    points as ``{metric: [[time, mean], ...]}``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for p in parts:
        try:
            tables.append(pq.read_table(p, columns=["time", "metric", "value"]))
        except (OSError, pa.ArrowException):
            continue
    if not tables:
        return {}
    frame = pa.concat_tables(tables).to_pandas()
    frame = frame[frame["value"].notna()]
    grouped = frame.groupby(["metric", "time"], sort=True)["value"].agg(["sum", "count"])
    changed: dict[str, list[list[float]]] = {}
    for (metric, t), row in grouped.iterrows():
        cell = acc.setdefault(str(metric), {}).setdefault(float(t), [0.0, 0])
        cell[0] += float(row["sum"])
        cell[1] += int(row["count"])
        mean = cell[0] / cell[1]
        changed.setdefault(str(metric), []).append(
            [float(t), mean if math.isfinite(mean) else None]
        )
    return changed


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, allow_nan=False, default=str)}\n\n".encode()


def make_app(
    dirs: list[Path] | None = None, *, root: Path = Path("runs"), poll_s: float = POLL_S
) -> web.Application:
    runs = Runs(dirs, root)
    app = web.Application()

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def list_runs(request: web.Request) -> web.Response:
        return web.json_response([run_info(k, p) for k, p in runs.all().items()])

    async def one_run(request: web.Request) -> web.Response:
        run_id = request.match_info["id"]
        path = runs.get(run_id)
        info = run_info(run_id, path)
        info["summary"] = _read_json(path / "summary.json")
        return web.json_response(info, dumps=lambda d: json.dumps(d, default=str))

    async def plot(request: web.Request) -> web.FileResponse:
        path = runs.get(request.match_info["id"])
        name = request.match_info["name"]
        file = path / "plots" / name
        if "/" in name or name.startswith(".") or not name.endswith(".png") or not file.is_file():
            raise web.HTTPNotFound(text=f"no plot '{name}'")
        return web.FileResponse(file)

    async def events(request: web.Request) -> web.StreamResponse:
        run_id = request.match_info["id"]
        path = runs.get(run_id)
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        seen: set[str] = set()
        acc: dict[str, dict[float, list[float]]] = {}
        last_progress = last_info = None
        try:
            while True:
                info = run_info(run_id, path)  # status first: rows flushed before it are read below
                parts = sorted((path / "metrics.parquet").glob("part-*.parquet"))
                new = [p for p in parts if p.name not in seen]
                if new:
                    seen.update(p.name for p in new)
                    changed = await asyncio.to_thread(_aggregate, new, acc)
                    if changed:
                        await resp.write(_sse("rows", {"metrics": changed, "parts": len(seen)}))
                progress = info.pop("progress")
                if progress != last_progress:
                    last_progress = progress
                    await resp.write(_sse("progress", progress))
                if info != last_info:
                    last_info = info
                    await resp.write(_sse("status", info))
                if info["status"] in FINAL and not new:
                    await resp.write(_sse("end", {"status": info["status"]}))
                    break
                await resp.write(b": ping\n\n")  # notices a closed page
                await asyncio.sleep(poll_s)
        except ConnectionResetError:  # the page was closed
            pass
        return resp

    app.router.add_get("/", index)
    app.router.add_get("/api/runs", list_runs)
    app.router.add_get("/api/runs/{id}", one_run)
    app.router.add_get("/api/runs/{id}/events", events)
    app.router.add_get("/api/runs/{id}/plots/{name}", plot)
    return app


class Dashboard:
    """The server on its own thread and event loop: ``start()`` gives the URL, ``stop()``."""

    def __init__(
        self,
        dirs: list[Path] | None = None,
        *,
        root: Path = Path("runs"),
        port: int | None = None,
        poll_s: float = POLL_S,
    ):
        self.app = make_app(dirs, root=root, poll_s=poll_s)
        self.port = port or 0
        self.url: str | None = None
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    async def _start(self) -> str:
        self._runner = web.AppRunner(self.app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        return f"http://{host}:{port}/"

    def start(self) -> str:
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="society-dashboard", daemon=True
        )
        self._thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=60)
        return self.url

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=60)


def serve(
    dirs: list[Path] | None = None, *, root: Path = Path("runs"), port: int | None = None
) -> None:
    """Serve until Ctrl-C, printing the URL first."""

    async def main() -> None:
        runner = web.AppRunner(make_app(dirs, root=root), shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port or 0)
        await site.start()
        host, bound = runner.addresses[0][:2]
        shown = f"{len(dirs)} run(s)" if dirs else f"runs under {root}/"
        print(f"dashboard of {shown}: http://{host}:{bound}/  (Ctrl-C stops)", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass


PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>society dashboard</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;display:flex;color:#222;min-height:100vh}
nav{width:290px;border-right:1px solid #ddd;padding:.6em;overflow:auto;background:#fafafa}
nav a{display:block;padding:.35em .4em;border-radius:4px;color:#222;text-decoration:none;font-size:90%}
nav a.sel{background:#dde7f7}main{flex:1;padding:.8em 1.4em;overflow:auto}
.st{font-weight:bold;font-size:80%;padding:0 .35em;border-radius:3px}
.st.running,.st.finishing{color:#05a}.st.completed{color:#070}
.st.failed,.st.interrupted,.st.degraded{color:#b00}.st.stopped{color:#a60}
table{border-collapse:collapse;margin:.4em 0 1em}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
td.l,th.l{text-align:left}.charts{display:flex;flex-wrap:wrap;gap:.8em}
.chart{border:1px solid #ddd;padding:.3em}.chart h4{margin:.1em 0;font-size:85%;font-weight:normal}
img{max-width:560px;border:1px solid #ddd;margin:.3em}#prog{font-family:monospace}
</style></head><body>
<nav><h3>runs</h3><div id="runs">loading…</div></nav>
<main><h2 id="title">no run selected</h2>
<p>status: <span id="status" class="st"></span> <span id="err"></span></p>
<p id="prog"></p>
<div id="headline"></div>
<h3>recorded metrics (live)</h3><div class="charts" id="charts"></div>
<div id="network"></div><div id="lineage"></div><div id="plots"></div>
</main>
<script>
"use strict";
let current=null, source=null, series={}, listed=[];
const $=id=>document.getElementById(id);
const esc=s=>String(s).replace(/[&<>"']/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]));
const fmt=v=>v==null?"–":(typeof v==="number"?(Number.isInteger(v)&&Math.abs(v)<1e15?v.toLocaleString("en"):(Math.abs(v)>=1e6||(v!==0&&Math.abs(v)<1e-3))?v.toExponential(3):+v.toPrecision(4)):esc(v));
const dur=s=>s==null?"–":s<90?s.toFixed(0)+" s":s<5400?(s/60).toFixed(1)+" min":(s/3600).toFixed(1)+" h";
async function loadRuns(){
  try{ listed=await (await fetch("api/runs")).json(); }catch(e){ return; }
  $("runs").innerHTML=listed.length?listed.map(r=>`<a href="#${encodeURIComponent(r.id)}" data-run="${esc(r.id)}" class="${r.id===current?"sel":""}">${esc(r.id)}<br><span class="st ${esc(r.status)}">${esc(r.status)}</span> ${esc(r.scenario)}</a>`).join(""):"no runs";
  if(current===null&&listed.length) select(decodeURIComponent(location.hash.slice(1))||listed[0].id);
}
function select(id){
  if(!listed.some(r=>r.id===id)) id=listed[0].id;
  current=id; series={}; $("charts").innerHTML=""; $("title").textContent=id;
  document.querySelectorAll("nav a").forEach(a=>a.classList.toggle("sel",a.dataset.run===id));
  if(source) source.close();
  source=new EventSource("api/runs/"+encodeURIComponent(id)+"/events");
  source.addEventListener("rows",e=>{const d=JSON.parse(e.data);for(const [m,pts] of Object.entries(d.metrics)){const s=series[m]||(series[m]=new Map());for(const [t,v] of pts) s.set(t,v);} draw();});
  source.addEventListener("progress",e=>showProgress(JSON.parse(e.data)));
  source.addEventListener("status",e=>showInfo(JSON.parse(e.data)));
  source.addEventListener("end",()=>{source.close(); source=null;});
}
function showProgress(p){
  if(!p){$("prog").textContent="";return;}
  let t=`${p.unit||"moments"} ${fmt(p.done)}${p.total?" of "+fmt(p.total)+" ("+(100*Math.min(1,(p.done||0)/p.total)).toFixed(0)+"%)":""} · rows ${fmt(p.rows)} · elapsed ${dur(p.elapsed_s)}`;
  if(p.eta_s!=null) t+=` · ETA ${dur(p.eta_s)}`;
  if(p.llm) t+=` · LLM ${p.llm.in_flight} in flight, ${fmt(p.llm.requests)} done, ${fmt(p.llm.tokens)} tokens, $${(p.llm.cost_usd||0).toFixed(4)}`;
  $("prog").textContent=t;
}
function showInfo(r){
  const s=$("status"); s.textContent=r.status; s.className="st "+r.status; s.dataset.status=r.status;
  $("err").textContent=r.error||"";
  const h=Object.entries(r.headline||{});
  $("headline").innerHTML=h.length?"<h3>headline (mean over replicates)</h3><table><tr><th class=l>metric</th><th>mean</th></tr>"+h.map(([k,v])=>`<tr><td class=l>${esc(k)}</td><td>${fmt(v)}</td></tr>`).join("")+"</table>":"";
  const img=(n,alt)=>`<img alt="${esc(alt)}" src="api/runs/${encodeURIComponent(r.id)}/plots/${encodeURIComponent(n)}?v=${Date.now()}">`;
  $("network").innerHTML=r.network.length?"<h3>network</h3>"+r.network.map(n=>img(n,n)).join(""):"";
  $("lineage").innerHTML=r.lineage.length?"<h3>artifact lineage</h3>"+r.lineage.map(n=>img(n,n)).join(""):"";
  const rest=r.plots.filter(n=>!r.network.includes(n)&&!r.lineage.includes(n));
  $("plots").innerHTML=rest.length?"<h3>plots</h3>"+rest.map(n=>img(n,n)).join(""):"";
  loadRuns();
}
function draw(){
  const box=$("charts");
  for(const [m,s] of Object.entries(series).sort()){
    let el=box.querySelector(`[data-metric="${CSS.escape(m)}"]`);
    if(!el){el=document.createElement("div");el.className="chart";el.dataset.metric=m;box.appendChild(el);}
    const pts=[...s.entries()].filter(p=>p[1]!=null).sort((a,b)=>a[0]-b[0]);
    el.dataset.points=pts.length;
    const W=460,H=200,L=48,B=22,step=Math.max(1,Math.ceil(pts.length/1500));
    const xs=pts.map(p=>p[0]),ys=pts.map(p=>p[1]);
    let x0=Math.min(...xs),x1=Math.max(...xs),y0=Math.min(...ys),y1=Math.max(...ys);
    if(!pts.length){x0=0;x1=1;y0=0;y1=1;} if(x1===x0)x1=x0+1; if(y1===y0){y0-=.5;y1+=.5;}
    const X=x=>L+(x-x0)/(x1-x0)*(W-L-6),Y=y=>H-B-(y-y0)/(y1-y0)*(H-B-6);
    const line=pts.filter((p,i)=>i%step===0||i===pts.length-1).map(p=>X(p[0]).toFixed(1)+","+Y(p[1]).toFixed(1)).join(" ");
    el.innerHTML=`<h4>${esc(m)} <small>(${pts.length} points, last ${pts.length?fmt(ys[ys.length-1]):"–"})</small></h4>`+
      `<svg width="${W}" height="${H}" data-points="${pts.length}"><rect x="${L}" y="0" width="${W-L}" height="${H-B}" fill="#fcfcfc" stroke="#ccc"/>`+
      `<text x="${L-4}" y="12" font-size="10" text-anchor="end">${fmt(y1)}</text><text x="${L-4}" y="${H-B}" font-size="10" text-anchor="end">${fmt(y0)}</text>`+
      `<text x="${L}" y="${H-6}" font-size="10">${fmt(x0)}</text><text x="${W-4}" y="${H-6}" font-size="10" text-anchor="end">${fmt(x1)} (time)</text>`+
      `<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="${line}"/></svg>`;
  }
}
$("runs").addEventListener("click",e=>{const a=e.target.closest("a[data-run]");if(a){e.preventDefault();location.hash=encodeURIComponent(a.dataset.run);select(a.dataset.run);}});
loadRuns(); setInterval(loadRuns,5000);
</script></body></html>
"""
