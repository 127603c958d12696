"""The HTML diagram's style sheet: a CSS grid left to right, down the page where narrow.

The grid's tracks, left to right: the start mark (two halves), then for each position a
gap (the connector from the one before) and the column as two equal halves, then a gap
and the end mark (two halves). Splitting each column in halves puts a grid line at its
centre, so a branch's other way is a grid item spanning from centre to centre, whatever
the columns' widths. Below the columns, one row per track of such ways.

Where the diagram's own box is narrower than its columns need (a phone, a side panel), a
container query turns the same grid a quarter turn: positions become rows down the
page, the ways run in narrow columns on the right. No script, no width asked of the
caller: the query is written into the diagram for its own number of columns.
"""

from __future__ import annotations

# A column's least width; a gap's width; the start and end marks' halves (rem).
COLUMN_MIN = 7.0
GAP = 1.25
MARK = 1.5

BASE = """
.frd{--frd-line:#94a3b8;--frd-taken:#15803d;--frd-fault:#b91c1c;--frd-ink:#0f172a;
 --frd-muted:#64748b;
 --frd-gap:%(gap)srem;--frd-mark:%(mark)srem;
 font:14px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--frd-ink);
 margin:0;padding:.5rem;box-sizing:border-box;max-width:100%%;overflow-x:auto}
.frd *,.frd *::before,.frd *::after{box-sizing:border-box}
.frd-caption{margin:0 0 .75rem;font-size:.9rem;color:var(--frd-muted)}
.frd-caption strong{color:var(--frd-ink);font-size:1rem}
.frd-caption .frd-runline{display:block;margin-top:.2rem;color:var(--frd-ink)}
.frd-grid{display:grid;justify-content:start;align-items:stretch;
 grid-template-columns:repeat(2,var(--frd-mark)) repeat(var(--frd-cols),var(--frd-gap)
 minmax(%(half)srem,9rem) minmax(%(half)srem,9rem)) var(--frd-gap) repeat(2,var(--frd-mark));
 grid-template-rows:auto repeat(var(--frd-tracks),1.6rem)}
.frd-cell{grid-row:1;grid-column:var(--at)/span 2;min-width:0}
.frd-start,.frd-end{position:relative;display:flex;flex-direction:column;align-items:center}
.frd-start span,.frd-end span{margin-top:.15rem;width:calc(2*var(--frd-mark));aspect-ratio:1;
 border-radius:50%%;border:2px solid var(--frd-line);display:flex;align-items:center;
 justify-content:center;font-size:.65rem;font-weight:600;color:var(--frd-muted);background:#fff}
.frd-end span{border-width:4px}
.frd-joined::after{content:"";position:absolute;top:calc(2*var(--frd-mark) + .2rem);bottom:0;
 left:calc(50%% - 1px);border-left:2px dashed var(--frd-line)}
.frd-flat{grid-template-rows:auto}
.frd-col{display:flex;flex-direction:column;gap:.4rem;padding:.3rem;border-radius:.5rem;
 background:#f8fafc;border:1px solid #e2e8f0}
.frd-pos{margin:0;font-size:.7rem;font-weight:600;color:var(--frd-muted);
 letter-spacing:.04em}
.frd-empty{margin:0;color:var(--frd-muted);font-size:.8rem}
.frd-step{background:#fff;border:1px solid #cbd5e1;border-left:4px solid var(--k);
 border-radius:.4rem;padding:.35rem .4rem;min-width:0;overflow-wrap:anywhere}
.frd-step[data-kind="branch"]{border-style:solid;border-left-style:double;border-left-width:6px}
.frd-kind{display:flex;align-items:center;gap:.3rem;font-size:.7rem;font-weight:600;
 color:var(--k);text-transform:none}
.frd-kind svg{flex:none;width:16px;height:16px}
.frd-title{margin:.15rem 0 .1rem;font-size:.85rem;font-weight:600}
.frd-facts{margin:0;font-size:.72rem}
.frd-facts div{display:-webkit-box;-webkit-line-clamp:3;-webkit-box-orient:vertical;
 overflow:hidden}
.frd-facts dt,.frd-facts dd{display:inline;margin:0}
.frd-facts dt{color:var(--frd-muted)}
.frd-link{margin:.2rem 0 0;font-size:.72rem;overflow-wrap:anywhere}
.frd-link a{color:var(--k);font-weight:600}
.frd-state{margin:.3rem 0 0;font-size:.72rem;color:var(--s)}
.frd-state p{margin:0;font-weight:600}
.frd-state ul{margin:0;padding:0;list-style:none;color:var(--frd-ink)}
.frd-next{grid-row:1;grid-column:var(--at);position:relative;align-self:start;height:1.9rem;
 font-size:.6rem;color:var(--frd-muted);text-align:center}
.frd-next::before{content:"";position:absolute;left:.1rem;right:.35rem;top:1.2rem;
 border-top:2px solid var(--frd-line)}
.frd-next::after{content:"";position:absolute;right:.05rem;top:calc(1.2rem - 4px);
 border:5px solid transparent;border-left:7px solid var(--frd-line);border-right:0}
.frd-other{grid-row:2/var(--row);grid-column:var(--lo)/var(--hi);position:relative;
 pointer-events:none}
.frd-other::before{content:"";position:absolute;inset:0 0 .6rem 0;border:2px dashed var(--frd-line);
 border-top:0;border-radius:0 0 .4rem .4rem}
.frd-other::after{content:"";position:absolute;top:-1px;border:5px solid transparent;
 border-bottom:7px solid var(--frd-line);border-top:0;transform:translateX(-50%%)}
.frd-other[data-dir="forward"]::after{left:100%%}
.frd-other[data-dir="back"]::after{left:0}
.frd-other span{position:absolute;bottom:0;left:50%%;transform:translateX(-50%%);
 background:#fff;padding:0 .25rem;font-size:.65rem;color:var(--frd-muted);white-space:nowrap}
.frd-way-taken{--frd-line:var(--frd-taken)}
.frd-fault,.frd-fault.frd-way-taken{--frd-line:var(--frd-fault)}
.frd-fault span{color:var(--frd-fault)}
.frd-other.frd-way-taken::before{border-style:solid;border-width:3px;border-top:0}
.frd-next.frd-way-taken::before{border-top-width:3px}
.frd-col[data-state="current"]{border:2px solid #1d4ed8;background:#eff6ff}
.frd-col[data-state="done"]{border-top:3px solid var(--frd-taken)}
.frd-col[data-state="skipped"],.frd-col[data-state="not_reached"]{opacity:.6;
 border-style:dashed}
.frd-step[data-state="ahead"],.frd-step[data-state="skipped"],
.frd-step[data-state="not_reached"]{border-style:dashed;border-left-style:solid}
.frd-step[data-state="failed"]{background:#fef2f2}
.frd-step[data-state="waiting"],.frd-step[data-state="working"],
.frd-step[data-state="retrying"]{box-shadow:0 0 0 2px #bfdbfe}
"""

# The quarter turn, inside the diagram's own container query: positions as rows.
NARROW = """
%(id)s .frd-grid{grid-template-columns:minmax(0,1fr) repeat(var(--frd-tracks),1.4rem);
 grid-template-rows:repeat(2,var(--frd-mark)) repeat(var(--frd-cols),var(--frd-gap)
 auto auto) var(--frd-gap) repeat(2,var(--frd-mark));justify-content:stretch}
%(id)s .frd-flat{grid-template-columns:minmax(0,1fr)}
%(id)s .frd-cell{grid-column:1;grid-row:var(--at)/span 2}
%(id)s .frd-start span,%(id)s .frd-end span{margin:0}
%(id)s .frd-joined::after{top:50%%;bottom:auto;left:calc(50%% + var(--frd-mark) + .1rem);right:0;
 border-left:0;border-top:2px dashed var(--frd-line)}
%(id)s .frd-next{grid-column:1;grid-row:var(--at);height:auto;align-self:stretch;
 justify-self:center;width:3rem}
%(id)s .frd-next::before{left:50%%;right:auto;top:.1rem;bottom:.4rem;border-top:0;
 border-left:2px solid var(--frd-line)}
%(id)s .frd-next::after{left:calc(50%% - 4px);right:auto;top:auto;bottom:0;
 border:5px solid transparent;border-top:7px solid var(--frd-line);border-bottom:0}
%(id)s .frd-next span{position:absolute;left:calc(50%% + .4rem);top:0}
%(id)s .frd-next.frd-way-taken::before{border-left-width:3px}
%(id)s .frd-other{grid-column:2/var(--row);grid-row:var(--lo)/var(--hi)}
%(id)s .frd-other::before{inset:0 .5rem 0 0;border:2px dashed var(--frd-line);border-left:0;
 border-radius:0 .4rem .4rem 0}
%(id)s .frd-other.frd-way-taken::before{border-style:solid;border-width:3px;border-left:0}
%(id)s .frd-other::after{left:-1px;transform:translateY(-50%%);border:5px solid transparent;
 border-right:7px solid var(--frd-line);border-left:0}
%(id)s .frd-other[data-dir="forward"]::after{top:100%%;left:-1px}
%(id)s .frd-other[data-dir="back"]::after{top:0;left:-1px}
%(id)s .frd-other span{writing-mode:vertical-rl;bottom:auto;top:50%%;left:auto;right:0;
 transform:translateY(-50%%);padding:.25rem 0}
"""


def base() -> str:
    """The style every diagram shares (scoped under ``.frd``)."""
    return BASE % {"gap": GAP, "mark": MARK, "half": COLUMN_MIN / 2}


def narrow(scope: str, container: str, columns: int) -> str:
    """The quarter turn for one diagram, below the width its ``columns`` need side by side."""
    need = columns * (COLUMN_MIN + GAP) + GAP + 4 * MARK + 1.0
    rules = NARROW % {"id": f"#{scope}"}
    return f"@container {container} (max-width: {need:g}rem) {{{rules}}}"
