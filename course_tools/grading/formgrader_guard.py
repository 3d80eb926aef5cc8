"""nbgrader's formgrader, loaded behind a Content-Security-Policy that lets only formgrader's own scripts run.

Why (issue 45): formgrader serves a learner's notebook as part of its own page on the instructor's Jupyter server,
and jupyter_server's policy (``frame-ancestors`` only) let any script in it act as the instructor. The instructor
view (``.jupyter/instructor/jupyter_server_config.json``) turns nbgrader's formgrader extension off and this one on;
this one loads formgrader itself, so without this module there is no formgrader at all (it fails closed), and:

- every formgrader page is sent with a policy whose ``script-src`` is a nonce made per response: the nonce is
  written only into formgrader's own ``<script>`` tags (its inline ones and those under ``formgrader/static/``),
  and on a submission page only into those of ``<head>`` (the body holds the student's name, then the notebook;
  the one script there, the name toggle's tooltips, does not run). No ``'unsafe-inline'`` (so no ``onerror=``/``javascript:``),
  no ``'self'`` (learner files are served from this origin), no eval; the two ``onclick`` strings of formgrader's
  name toggle are allowed by hash. ``base-uri``, ``form-action``, ``object-src`` and frames are ``'none'``;
  images, styles and connections only from the server itself (and data: images);
- everything else under ``formgrader/`` (a learner's files beside the notebook, static files) is sent sandboxed
  with no script (``default-src 'none'; sandbox``) and ``nosniff``;
- formgrader's exporter gets ``safe_html.SafeNotebookHTML`` if ``nbgrader_config.py`` did not give it one.

MathJax (a CDN script) is not given the nonce: math shows as its TeX source; a stand-in tells formgrade.js that
typesetting is done (:data:`MATHJAX_STAND_IN`), which it waits for before focusing the first score field.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets

from tornado.web import OutputTransform

from course_tools.grading.safe_html import SafeNotebookHTML

__all__ = ["NOTEBOOK_MARK", "add_nonces", "files_policy", "kind_of", "page_policy"]

NOTEBOOK_MARK = 'id="notebook-container"'  # nbgrader's formgrade template: the learner's notebook follows
_HANDLERS = ("toggle_name(true);", "toggle_name(false);")  # formgrade_macros.html.j2's inline onclick values
_HASHES = " ".join("'sha256-" + base64.b64encode(hashlib.sha256(h.encode()).digest()).decode() + "'"
                   for h in _HANDLERS)
_SCRIPT = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)
_SRC = re.compile(r"""\bsrc\s*=\s*["']?([^"'\s>]*)""", re.IGNORECASE)
_NAVIGATION = r"(?:next_incorrect|prev_incorrect|next|prev)"
#: formgrade.js's set-up asks MathJax to say when it has typeset the page, and stops with an error without it (as it
#: does offline): this says "typeset" at once, so the page focuses and scrolls to the first score field as before
MATHJAX_STAND_IN = ("window.MathJax=window.MathJax||{Hub:{Queue:function(){},Startup:{signal:{Interest:"
                    "function(f){setTimeout(function(){f('End')},0)}}}}};")


def page_policy(nonce: str) -> str:
    policy = [
        "default-src 'none'",
        f"script-src 'nonce-{nonce}' 'unsafe-hashes' {_HASHES}",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "object-src 'none'",
        "frame-src 'none'",
        "frame-ancestors 'self'",
    ]
    return "; ".join(policy)  # no report-uri: jupyter_server answers reports without an _xsrf token with 403


def files_policy() -> str:
    return "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-ancestors 'self'; sandbox"


def kind_of(path: str, base_url: str) -> str | None:
    """``submission`` (a notebook page), ``page`` (formgrader's other pages), ``api``, ``files``, or None (not
    formgrader's)."""
    if not path.startswith(base_url.rstrip("/") + "/formgrader"):
        return None
    rest = path[len(base_url.rstrip("/")) + len("/formgrader"):]
    if rest and not rest.startswith("/"):
        return None  # /formgraderX is someone else's
    if rest.startswith("/api/"):
        return "api"
    if re.fullmatch(r"/(static|fonts|submissions/components)/.*", rest):
        return "files"
    if re.fullmatch(r"/submissions/[^/]+/?", rest):
        return "submission"
    if re.fullmatch(rf"/submissions/[^/]+/{_NAVIGATION}/?", rest):
        return "page"
    if rest.startswith("/submissions/"):
        return "files"
    return "page"


def add_nonces(page: str, nonce: str, static_prefix: str, submission: bool) -> str:
    """The nonce on formgrader's own scripts: inline ones and those under ``static_prefix``. On a submission page
    only those in ``<head>``: the body holds the student's name (from the roster, which an LMS may let a learner
    name) and then the notebook; none at all if the page is not nbgrader's template (no :data:`NOTEBOOK_MARK`)."""
    end = page.find("<body") if submission else len(page)
    if end < 0 or (submission and NOTEBOOK_MARK not in page[end:]):
        return page

    def mark(found: re.Match) -> str:
        src = _SRC.search(found.group(1))
        if src and not src.group(1).startswith(static_prefix):
            return found.group(0)
        return f'<script nonce="{nonce}"{found.group(1)}>'

    head = _SCRIPT.sub(mark, page[:end])
    if submission and "</head>" in head:  # formgrade.js waits on MathJax, which the policy keeps out
        at = head.rindex("</head>")
        head = head[:at] + f'<script nonce="{nonce}">{MATHJAX_STAND_IN}</script>\n' + head[at:]
    return head + page[end:]


def _transform(base_url: str):
    class FormgraderPolicy(OutputTransform):
        def __init__(self, request):
            self.kind = kind_of(request.path, base_url)

        def transform_first_chunk(self, status_code, headers, chunk, finishing):
            if self.kind is None:
                return status_code, headers, chunk
            headers["X-Content-Type-Options"] = "nosniff"
            if self.kind == "files":
                headers["Content-Security-Policy"] = files_policy()
            elif self.kind in ("page", "submission"):
                nonce = secrets.token_urlsafe(18)
                if finishing and "html" in headers.get("Content-Type", ""):
                    page = add_nonces(chunk.decode("utf-8", "replace"), nonce,
                                      base_url.rstrip("/") + "/formgrader/static/", self.kind == "submission")
                    chunk = page.encode("utf-8")
                    headers["Content-Length"] = str(len(chunk))
                headers["Content-Security-Policy"] = page_policy(nonce)
                headers["Cache-Control"] = "no-store"  # a cached page would carry an old nonce
                headers.pop("Etag", None)
            return status_code, headers, chunk

    return FormgraderPolicy


def harden_exporter(exporter) -> None:
    """Formgrader's HTMLExporter runs :class:`SafeNotebookHTML` whatever ``nbgrader_config.py`` says."""
    if not any(isinstance(p, SafeNotebookHTML) and p.enabled for p in getattr(exporter, "_preprocessors", [])):
        exporter.register_preprocessor(SafeNotebookHTML, enabled=True)


def _jupyter_server_extension_points():
    return [{"module": "course_tools.grading.formgrader_guard"}]


def _load_jupyter_server_extension(serverapp):
    from nbgrader.server_extensions.formgrader import load_jupyter_server_extension as load_formgrader

    web_app = serverapp.web_app
    web_app.transforms.insert(0, _transform(web_app.settings.get("base_url", "/")))
    load_formgrader(serverapp)
    harden_exporter(web_app.settings["nbgrader_exporter"])
    serverapp.log.info("formgrader loaded behind course_tools.grading.formgrader_guard (CSP, sanitized notebooks)")
