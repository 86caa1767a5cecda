"""``sluice report``: one self-contained HTML page about recent runs (no scripts, no CDN).

Charts are inline SVG drawn here: rows/s per run (capture and each group's sync), lag after
each run (capture seconds behind the source, each group's oldest pending batch), each group's
end-to-end freshness after each run (source commit time of its newest applied row vs then), rows per run;
then a table of the runs with their status and first error. Hovering a point shows its value
(SVG ``<title>``). Everything comes from the run log (``<store>/runs.jsonl``).
"""

from __future__ import annotations

import datetime as dt
import html
import math
from typing import Any

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
W, H, ML, MR, MT, MB = 900, 260, 64, 16, 28, 44


def _nice(hi: float) -> tuple[float, float]:
    """A round upper bound and tick step for an axis from 0 to ``hi``."""
    if hi <= 0:
        return 1.0, 0.25
    exp = 10 ** math.floor(math.log10(hi))
    for m in (1, 2, 2.5, 5, 10):
        if hi <= m * exp:
            top = m * exp
            break
    return top, top / 4


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3g}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.3g}k"
    return f"{v:.3g}"


def _label(rec: dict[str, Any]) -> str:
    try:
        return dt.datetime.fromisoformat(rec.get("started") or "").strftime("%m-%d %H:%M:%S")
    except ValueError:
        return str(rec.get("run", ""))


def svg_chart(title: str, labels: list[str], series: dict[str, list[float | None]], unit: str,
              failed: list[bool] | None = None) -> str:
    """A line chart: one polyline per series over the runs (x: run order)."""
    n = len(labels)
    values = [v for vs in series.values() for v in vs if v is not None]
    top, step = _nice(max(values) if values else 0.0)
    pw, ph = W - ML - MR, H - MT - MB

    def x(i: int) -> float:
        return ML + (pw * (i + 0.5) / n if n else 0)

    def y(v: float) -> float:
        return MT + ph - ph * (v / top)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           f'role="img" aria-label="{html.escape(title)}">',
           f'<text x="{ML}" y="18" class="t">{html.escape(title)}</text>']
    k = 0.0
    while k <= top + 1e-9:
        yy = y(k)
        out.append(f'<line x1="{ML}" x2="{W - MR}" y1="{yy:.1f}" y2="{yy:.1f}" class="g"/>'
                   f'<text x="{ML - 6}" y="{yy + 4:.1f}" class="yl">{_fmt(k)}</text>')
        k += step
    out.append(f'<text x="12" y="{MT + ph / 2:.0f}" class="u" transform="rotate(-90 12 {MT + ph / 2:.0f})">'
               f'{html.escape(unit)}</text>')
    every = max(1, math.ceil(n / 8))
    for i, lab in enumerate(labels):
        if i % every == 0 or i == n - 1:
            out.append(f'<text x="{x(i):.1f}" y="{H - MB + 16}" class="xl">{html.escape(lab)}</text>')
        if failed and failed[i]:
            out.append(f'<rect x="{x(i) - 3:.1f}" y="{H - MB + 2}" width="6" height="6" class="f">'
                       f'<title>{html.escape(lab)}: failed</title></rect>')
    for si, (name, vs) in enumerate(series.items()):
        color = PALETTE[si % len(PALETTE)]
        pts = [(x(i), y(v), v, labels[i]) for i, v in enumerate(vs) if v is not None]
        if len(pts) > 1:
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                       + " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in pts) + '"/>')
        for px, py, v, lab in pts:
            out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}">'
                       f'<title>{html.escape(name)} {html.escape(lab)}: {v:g} {html.escape(unit)}</title></circle>')
        lx = ML + 10 + si * 170
        out.append(f'<rect x="{lx}" y="{H - 16}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{lx + 14}" y="{H - 7}" class="lg">{html.escape(name)}</text>')
    if not values:
        out.append(f'<text x="{W / 2}" y="{MT + ph / 2}" class="xl">no data</text>')
    out.append("</svg>")
    return "".join(out)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def render(runs: list[dict[str, Any]], *, source: str, store: str, now: str | None = None) -> str:
    """The HTML page for ``runs`` (oldest first)."""
    labels = [_label(r) for r in runs]
    groups = list(dict.fromkeys(g for r in runs for g in (r.get("sync") or {})))
    failed = [r.get("status") not in ("ok", "nothing") for r in runs]
    rate = {"capture": [_num((r.get("capture") or {}).get("rows_per_s")) for r in runs]}
    rows = {"captured": [_num((r.get("capture") or {}).get("rows")) for r in runs]}
    lag = {"capture behind source": [_num(((r.get("lag") or {}).get("capture") or {}).get("lag_s")) for r in runs]}
    fresh: dict[str, list[float | None]] = {}
    for g in groups:
        rate[f"sync {g}"] = [_num(((r.get("sync") or {}).get(g) or {}).get("rows_per_s")) for r in runs]
        rows[f"synced {g}"] = [_num(((r.get("sync") or {}).get(g) or {}).get("rows")) for r in runs]
        lag[f"{g} oldest pending"] = [_num((((r.get("lag") or {}).get("groups") or {}).get(g) or {}).get("lag_s"))
                                      for r in runs]
        fresh[g] = [_num((((r.get("lag") or {}).get("groups") or {}).get(g) or {}).get("freshness_s"))
                    for r in runs]
    charts = [svg_chart("Throughput per run", labels, rate, "rows/s", failed),
              svg_chart("Lag after each run", labels, lag, "seconds", failed),
              svg_chart("Freshness after each run: source commit time of the newest applied row, seconds ago",
                        labels, fresh, "seconds", failed),
              svg_chart("Rows per run", labels, rows, "rows", failed)]
    ok = sum(1 for f in failed if not f)
    body = [f"<h1>Sluice runs: {html.escape(source)}</h1>",
            f'<p class="m">store {html.escape(store)} · {len(runs)} runs ({ok} succeeded, {len(runs) - ok} failed) · '
            f"generated {html.escape(now or dt.datetime.now(dt.UTC).isoformat(timespec='seconds'))}</p>"]
    if runs:
        last = runs[-1]
        cls = "ok" if last.get("status") in ("ok", "nothing") else "bad"
        body.append(f'<p>Last run <b>{html.escape(str(last.get("run")))}</b>: <span class="{cls}">'
                    f'{html.escape(str(last.get("status")))}</span> (exit {last.get("exit")}), '
                    f'{last.get("seconds")} s, finished {html.escape(str(last.get("finished")))}</p>')
    body += [f'<div class="c">{c}</div>' for c in charts]
    body.append("<h2>Runs (newest first)</h2><table><tr><th>run</th><th>started</th><th>status</th><th>s</th>"
                "<th>captured</th>"
                + "".join(f"<th>{html.escape(g)} rows</th><th>{html.escape(g)} rows/s</th>" for g in groups)
                + "".join(f"<th>{html.escape(g)} freshness s</th>" for g in groups)
                + "<th>capture lag s</th><th>error</th></tr>")
    for r in reversed(runs):
        cap = r.get("capture") or {}
        errors = r.get("errors") or []
        cls = "ok" if r.get("status") in ("ok", "nothing") else "bad"
        status = f'<span class="{cls}">{html.escape(str(r.get("status")))}</span>'
        cells = [html.escape(str(r.get("run", ""))), html.escape(str(r.get("started", ""))), status,
                 _cell(r.get("seconds")), _cell(cap.get("rows"))]
        for g in groups:
            s = (r.get("sync") or {}).get(g) or {}
            failed = s.get("ok") is False
            cells += [_cell(s.get("rows"), "failed" if failed else "-"), _cell(s.get("rows_per_s"))]
        for g in groups:
            cells.append(_cell((((r.get("lag") or {}).get("groups") or {}).get(g) or {}).get("freshness_s")))
        cells.append(_cell(((r.get("lag") or {}).get("capture") or {}).get("lag_s")))
        cells.append(_errors(errors))
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    body.append("</table>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Sluice runs: {html.escape(source)}</title><style>{CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


#: characters of an error shown in the table (its whole first message is usually far shorter)
ERROR_CHARS = 2000


def _cell(v: Any, missing: str = "-") -> str:
    """A number for the table: ``-`` (or ``missing``) where the run has none, never ``None``."""
    return missing if v is None or v == "" else html.escape(str(v))


def _errors(errors: list[dict[str, Any]]) -> str:
    """Every error of a run, each with its stage and group and its whole message (the cause is often
    on its second line: "1 of 4 partitions failed; no batch was acked:" then the table and key)."""
    out = []
    for e in errors:
        where = str(e.get("stage") or "") + (f" {e['group']}" if e.get("group") else "")
        text = str(e.get("message") or "")
        if len(text) > ERROR_CHARS:
            text = text[:ERROR_CHARS] + " ..."
        out.append(f"<b>{html.escape(where)}</b>: {html.escape(text)}" if where else html.escape(text))
    return f'<span class="e">{"<br>".join(out)}</span>' if out else ""


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:960px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin-top:28px}.m{color:#666;margin:0 0 12px}
.c{margin:12px 0;border:1px solid #e3e3e3;border-radius:6px;background:#fff}
svg .t{font-size:14px;font-weight:600}svg .g{stroke:#eee}svg .yl{font-size:11px;text-anchor:end;fill:#666}
svg .xl{font-size:10px;text-anchor:middle;fill:#666}svg .u{font-size:11px;fill:#666;text-anchor:middle}
svg .lg{font-size:11px;fill:#333}svg .f{fill:#d62728}
table{border-collapse:collapse;font-size:12px;width:100%}td,th{border-bottom:1px solid #eee;padding:4px 6px;
text-align:right}td:first-child,th:first-child,td:last-child,th:last-child{text-align:left}
.ok{color:#2ca02c;font-weight:600}.bad{color:#d62728;font-weight:600}.e{color:#a33;white-space:pre-wrap;
text-align:left;display:block}
"""
