"""Learner content made inert before a page shows it to an instructor: formgrader's submission view and feedback.

Why (issue 45): formgrader renders a submission on the instructor's own Jupyter server, so a script in a learner's
markdown or output ran with the instructor's cookies (terminals, the gradebook, every submission). nbconvert's own
``SanitizeHTML`` (bleach) is the base of :class:`SafeNotebookHTML`; we do not write an HTML sanitizer. It is
tightened where nbconvert 7.17 and nbgrader 0.9.6's templates leave holes, each measured:

- ``SanitizeHTML`` bleaches a markdown cell's *source*, then mistune turns ``[x](javascript:...)`` into a live
  link; here the markdown is rendered first and the HTML bleached (``text/markdown`` outputs likewise);
- it keeps output metadata whole, and nbconvert's templates write ``width``/``height`` into unquoted attributes
  (``width=1 onerror=...``); here only numbers survive, and ``isolated`` (an iframe) and ``filenames`` go;
- it trusts image data to be base64, and nbgrader's templates write execution counts and grade ids into the page
  unescaped: here each is checked, odd characters replaced;
- its allowlist keeps ``id`` on nothing but formgrader finds its score fields by id; we keep no ``id`` and no
  ``style``, and ``class`` only with short or known names, so learner content cannot stand in for a score field.

Disallowed tags are escaped, not dropped: the instructor sees ``<script>`` as text. What stays: text, tables,
links (http, https, mailto), images (and data: images), code. SVG, JavaScript and widget outputs are dropped.
The Content-Security-Policy on formgrader's pages (``formgrader_guard``) and in feedback pages is the second layer.
"""

from __future__ import annotations

import html
import re

import bleach
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath, markdown2html_mistune
from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets import Any, List, Set, Unicode

__all__ = ["SafeNotebookHTML", "clean_html", "markdown_html"]

TAGS = sorted(set(bleach.ALLOWED_TAGS) | {
    "p", "div", "span", "pre", "code", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "img",
    "table", "thead", "tbody", "tfoot", "tr", "th", "td", "caption", "sub", "sup", "del", "s", "u", "dl", "dt",
    "dd", "kbd", "samp", "var", "small", "mark", "details", "summary"})
PROTOCOLS = ["http", "https", "mailto", "data"]
#: pygments' token classes (``k``, ``nn``, ``s2``), markdown's, pandas' tables; never formgrader's own (``score``)
_CLASS = re.compile(r"^(?:[a-z][a-z0-9]?[a-z0-9]?|highlight|anchor-link|dataframe|language-[\w+-]+)$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")
_GRADE_ID = re.compile(r"^[\w.\-]+$")
_IMAGES = ("image/png", "image/jpeg")


def _attribute(tag: str, name: str, value: str) -> bool:
    if name == "class":
        return all(_CLASS.match(token) for token in value.split())
    if name in ("title", "alt"):
        return True
    if tag == "a":
        return name == "href" and not value.strip().lower().startswith("data:")  # data: only for images
    if tag == "img":
        return name in ("src", "width", "height")
    if tag in ("td", "th"):
        return name in ("colspan", "rowspan", "align")
    return tag == "ol" and name == "start"


_CLEANER = bleach.Cleaner(tags=TAGS, attributes=_attribute, protocols=PROTOCOLS, strip=False, strip_comments=True)


def clean_html(text) -> str:
    """HTML with only the tags and attributes above; everything else escaped (shown as text)."""
    return _CLEANER.clean(text if isinstance(text, str) else "".join(text))


def markdown_html(source, attachments: dict | None = None) -> str:
    """Markdown rendered as nbconvert renders it (attachments embedded, no anchor links), then cleaned."""
    renderer = IPythonRenderer(escape=False, attachments=_safe_attachments(attachments), exclude_anchor_links=True)
    return clean_html(MarkdownWithMath(renderer=renderer).render(source if isinstance(source, str) else "".join(source)))


def _verbatim(cleaned: str) -> str:
    """Clean HTML as markdown that the template's ``markdown2html`` passes through unchanged: one ``<div>`` line
    (an HTML block ends at a blank line; ``&#10;`` is the same newline to a browser, in text and in ``<pre>``).
    Anything mistune would not pass as is is shown escaped instead."""
    one = "<div>" + cleaned.strip().replace("\r", "").replace("\n", "&#10;") + "</div>"
    if markdown2html_mistune(one).strip() == one:
        return one
    return "<pre>" + html.escape(cleaned) + "</pre>"  # pragma: no cover - mistune changed; still safe


class _Attachments(dict):
    """A cell's attachments for nbconvert's renderer: images with base64 data only; any other name (missing, or
    not such an image) an empty image, where nbconvert would fail the whole page."""

    def __contains__(self, name) -> bool:
        return True

    def __missing__(self, name) -> dict:
        return {"image/png": ""}


def _safe_attachments(attachments) -> dict:
    kept = _Attachments()
    for name, bundle in (attachments or {}).items():
        images = {mime: data for mime, data in (bundle.items() if isinstance(bundle, dict) else ())
                  if mime in (*_IMAGES, "image/gif") and isinstance(data, str) and _BASE64.match(data)}
        if images:
            kept[name] = images
    return kept


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _metadata(metadata) -> dict:
    """Of an output's metadata, the numbers and flags nbconvert's image templates use, nothing else."""
    kept = {}
    for mime in _IMAGES:
        entry = (metadata or {}).get(mime)
        if isinstance(entry, dict):
            size = {k: v for k, v in entry.items()
                    if k in ("width", "height") and isinstance(v, (int, float)) and not isinstance(v, bool)}
            if entry.get("unconfined") is True:
                size["unconfined"] = True
            if size:
                kept[mime] = size
    return kept


class SafeNotebookHTML(SanitizeHTML):
    """nbconvert's ``SanitizeHTML`` with the course's allowlist, closing what formgrader's templates leave open.

    ``nbgrader_config.py`` lists it in ``c.HTMLExporter.preprocessors`` (formgrader and ``generate_feedback``);
    ``formgrader_guard`` adds it to formgrader's exporter if a config does not.
    """

    attributes = Any(_attribute, help="bleach attribute filter").tag(config=True)
    tags = List(Unicode(), TAGS).tag(config=True)
    safe_output_keys = Set({"text/plain", "text/latex", *_IMAGES}).tag(config=True)
    sanitized_output_types = Set({"text/html", "text/markdown"}).tag(config=True)

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)  # the widget state a template writes into a <script> element
        return super().preprocess(nb, resources)

    def sanitize_html_tags(self, html_str):
        return clean_html(html_str)

    def preprocess_cell(self, cell, resources, cell_index):
        meta = cell.setdefault("metadata", {})
        if not isinstance(meta.get("tags", []), list):
            meta["tags"] = []
        meta["tags"] = [t for t in meta.get("tags", []) if isinstance(t, str)]
        nbgrader = meta.get("nbgrader")
        if isinstance(nbgrader, dict) and not _GRADE_ID.match(str(nbgrader.get("grade_id", "x"))):
            nbgrader["grade_id"] = re.sub(r"[^\w.\-]", "_", str(nbgrader["grade_id"]))  # not one of the course's
        if cell.cell_type == "markdown":
            cell.source = _verbatim(markdown_html(cell.source, cell.pop("attachments", None)))
        elif cell.cell_type == "code":
            cell.execution_count = _count(cell.get("execution_count"))
            cell.outputs = self.sanitize_code_outputs(cell.get("outputs", []))
        else:  # raw, or a type nbformat does not know: inert text
            cell.cell_type = "raw"
            cell.pop("attachments", None)
            cell.source = self.sanitize_html_tags(cell.get("source", ""))
        return cell, resources

    def sanitize_code_outputs(self, outputs):
        for output in outputs:
            if "execution_count" in output:
                output["execution_count"] = _count(output["execution_count"])
            if output.get("output_type") in ("stream", "error"):
                continue  # templates escape both (ansi2html)
            data = output.setdefault("data", {})
            if "text/markdown" in data and "text/html" not in data:
                data["text/html"] = markdown_html(data["text/markdown"])
            data.pop("text/markdown", None)
            for mime in _IMAGES:
                if mime in data and not (isinstance(data[mime], str) and _BASE64.match(data[mime])):
                    del data[mime]
            output["metadata"] = _metadata(output.get("metadata"))
        return super().sanitize_code_outputs(outputs)
