"""Learner content rendered inert (course_tools/grading/safe_html.py) through nbgrader's real templates, formgrader's
Content-Security-Policy (formgrader_guard.py) and the feedback pages' (class_level/feedback.py), and the config that
puts each in place. tests/e2e/test_hostile_submission.py opens the same payloads in Chromium.
"""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbgrader.server_extensions.formgrader import handlers
from traitlets.config import Config

from course_tools.grading import formgrader_guard as guard
from course_tools.grading.class_level.feedback import PAGE_POLICY, with_policy
from course_tools.grading.safe_html import SafeNotebookHTML, clean_html, markdown_html
from support import hostile
from support.layout import ROOT

RESOURCES = {"assignment_id": "01_tiny", "notebook_id": "01_tiny", "submission_id": "abc123", "index": 0,
             "total": 1, "base_url": "", "student": "mallory", "last_name": "", "first_name": "",
             "notebook_path": "autograded/mallory/01_tiny/01_tiny.ipynb",
             "nbgrader": {"notebook": "01_tiny", "score": 1, "max_score": 3, "late_penalty": 0}}
FORBIDDEN = {"script", "iframe", "frame", "object", "embed", "form", "meta", "base", "svg", "math", "style", "link"}


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found = []

    def handle_starttag(self, tag, attrs):
        if tag in FORBIDDEN:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on") or name in ("srcdoc", "formaction"):
                self.found.append(f"<{tag} {name}>")
            elif (value or "").strip().lower().startswith(("javascript:", "vbscript:", "data:text")):
                self.found.append(f"<{tag} {name}={value[:11]}>")


def dangers(page: str) -> list[str]:
    """What in a page's tags (not its text) could run or load a document: a script, a frame, an embedded
    document, a form, a refresh, a base URL, an event handler, a script URL."""
    tags = _Tags()
    tags.feed(page)
    return tags.found


def hostile_notebook() -> nbformat.NotebookNode:
    grade = new_code_cell("def square(x):\n    return x * x\n", execution_count=2, metadata={"nbgrader": {
        "schema_version": 3, "solution": True, "grade": True, "locked": False, "grade_id": "square-check",
        "points": 1, "score": 1}})
    planted = new_markdown_cell("mine", metadata={"nbgrader": {
        "schema_version": 3, "solution": True, "grade": False, "locked": False,
        "grade_id": f'x"><img src=x onerror="{hostile.js("grade_id")}">'}, "tags": ['t"><script>x</script>']})
    attached = new_markdown_cell("![pic](attachment:a.png) ![bad](attachment:b.png)")
    attached["attachments"] = {"a.png": {"image/png": hostile.PNG},
                               "b.png": {"image/png": f'x" onerror="{hostile.js("attachment")}'}}
    plain = new_markdown_cell("# Heading\n\nText with `a < b -> c & d` and **bold**.")
    cells = [plain, grade, planted, attached]
    cells += [new_markdown_cell(source) for source in hostile.MARKDOWN.values()]
    cells += [nbformat.v4.new_raw_cell(hostile.RAW, metadata={"raw_mimetype": "text/html"})]
    cells += hostile.rendered_outputs()
    nb = new_notebook(cells=cells)
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {}, "version_major": 2, "version_minor": 0, "x": f"</script><script>{hostile.js('widgets')}</script>"}}
    return nb


def render(template: str, safe: bool = True) -> str:
    c = Config()
    c.HTMLExporter.template_name = template
    c.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    c.HTMLExporter.extra_template_paths = [str(Path(handlers.static_path) / "node_modules/bootstrap/dist/css")]
    if safe:
        c.HTMLExporter.preprocessors = [SafeNotebookHTML]
    page, _ = HTMLExporter(config=c).from_notebook_node(copy.deepcopy(hostile_notebook()),
                                                        resources=copy.deepcopy(RESOURCES))
    return page


def learner_part(page: str) -> str:
    return page[page.index(guard.NOTEBOOK_MARK):]


@pytest.mark.parametrize("template", ["formgrade", "feedback"])
def test_the_payloads_are_live_without_the_sanitizer(template):
    """The fixture is hostile: rendered as nbgrader would without the course's sanitizer, every kind of danger is
    in the page (so the test below can fail)."""
    found = " ".join(dangers(learner_part(render(template, safe=False))))
    for danger in ("<script>", "<iframe>", "srcdoc", "<meta>", "<base>", "<svg>", "<object>", "<embed>", "<form>",
                   "<img onerror>", "<a href=javascript:"):
        assert danger in found, (danger, found)
    assert re.search(r"<img[^>]*onload=[^>]*out_image_meta", render(template, safe=False))  # nbconvert's width


@pytest.mark.parametrize("template", ["formgrade", "feedback"])
def test_nothing_learner_made_can_run_in_the_rendered_page(template):
    page = learner_part(render(template))
    assert dangers(page) == []


def test_the_instructor_still_reads_the_answer():
    page = learner_part(render("formgrade"))
    assert "&lt;script&gt;" in page  # a payload is shown as text, not hidden
    assert "<h1>Heading</h1>" in page and "<code>a &lt; b -&gt; c &amp; d</code>" in page  # no double escaping
    assert "<strong>bold</strong>" in page
    assert f'src="data:image/png;base64,{hostile.PNG}"' in page  # an attachment image, and a plot
    assert 'width="1 onerror' not in page and "width=1" not in page  # the forged width is gone
    assert "<b>html</b>" in page  # harmless HTML in an output stays
    assert '<input class="score tabbable" id="square-check"' in page  # formgrader's own field is the only id
    assert len(re.findall(r'id="square-check"', page)) == 1


def test_grade_ids_counts_and_tags_are_escaped_or_dropped():
    """(nbconvert refuses a notebook whose execution count is not a number before any template sees it; the
    sanitizer makes it one anyway.)"""
    nb = hostile_notebook()
    nb.cells[-1].execution_count = f"<script>{hostile.js('execution_count')}</script>"
    nb = SafeNotebookHTML().preprocess(nb, {})[0]
    planted = nb.cells[2]
    assert re.fullmatch(r"[\w.-]+", planted.metadata.nbgrader.grade_id)
    assert nb.cells[1].metadata.nbgrader.grade_id == "square-check"  # a real id is untouched
    assert nb.cells[-1].execution_count is None and nb.cells[1].execution_count == 2
    assert "widgets" not in nb.metadata
    kept = {mime for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs for mime in o.get("data", {})}
    assert kept <= {"text/plain", "text/html", "image/png"}, kept  # javascript, svg, widget, markdown gone


def test_clean_html_allowlist():
    assert clean_html('<a href="javascript:alert(1)">x</a>') == "<a>x</a>"
    assert clean_html('<a href="data:text/html,hi">x</a>') == "<a>x</a>"
    assert clean_html('<img src="data:image/png;base64,AAAA">') == '<img src="data:image/png;base64,AAAA">'
    assert clean_html('<p id="square-check" style="position:fixed" class="score">x</p>') == "<p>x</p>"
    assert clean_html('<span class="k nn">x</span>') == '<span class="k nn">x</span>'
    assert clean_html("<style>body{display:none}</style>") == "&lt;style&gt;body{display:none}&lt;/style&gt;"
    assert "href" not in markdown_html("[x](javascript:alert(1)) <javascript:alert(1)>")


@pytest.mark.parametrize("path, kind", [
    ("/formgrader", "page"), ("/formgrader/", "page"), ("/formgrader/manage_students", "page"),
    ("/formgrader/gradebook/01_tiny/01_tiny", "page"), ("/formgrader/submissions/abc123/", "submission"),
    ("/formgrader/submissions/abc123", "submission"), ("/formgrader/submissions/abc123/next", "page"),
    ("/formgrader/submissions/abc123/evil.html", "files"), ("/formgrader/submissions/abc123/a/b.png", "files"),
    ("/formgrader/submissions/components/x.js", "files"), ("/formgrader/static/js/formgrade.js", "files"),
    ("/formgrader/api/grades", "api"), ("/formgraderx", None), ("/lab", None), ("/files/formgrader", None),
])
def test_each_formgrader_route_has_its_kind(path, kind):
    assert guard.kind_of(path, "/") == kind
    assert guard.kind_of("/services/course" + path, "/services/course/") == kind


def test_the_page_policy_runs_only_nonced_scripts():
    policy = guard.page_policy("N0NCE")
    script_src = next(d for d in policy.split("; ") if d.startswith("script-src"))
    assert "'nonce-N0NCE'" in script_src
    assert not {"'unsafe-inline'", "'self'", "'unsafe-eval'", "'strict-dynamic'", "*", "data:"} & set(script_src.split())
    for directive in ("default-src 'none'", "base-uri 'none'", "form-action 'none'", "object-src 'none'",
                      "frame-src 'none'"):
        assert directive in policy
    assert "sandbox" in guard.files_policy() and "allow-scripts" not in guard.files_policy()


def test_nonces_go_only_to_formgraders_own_scripts_in_the_head():
    page = render("formgrade")
    marked = guard.add_nonces(page, "N0NCE", "/formgrader/static/", submission=True)
    head, body = marked.split("<body", 1)
    assert head.count('nonce="N0NCE"') == len(re.findall(r"<script\b(?![^>]*cdnjs)", head))  # the MathJax stand-in too
    assert head.count('nonce="N0NCE"') >= 8  # jquery ... formgrade.js, and the inline set-up
    assert "N0NCE" not in body
    assert re.search(r"<script nonce=\"N0NCE\" src=\"/formgrader/static/js/formgrade.js\"", head)
    assert not re.search(r'<script nonce="N0NCE" src="https://', head)  # MathJax from a CDN: no
    # learner content with the template's mark and scripts of its own, should the sanitizer be off
    unsafe = render("formgrade", safe=False)
    assert "N0NCE" not in guard.add_nonces(unsafe, "N0NCE", "/formgrader/static/", True).split("<body", 1)[1]
    assert guard.add_nonces("<html><script>x</script>", "N0NCE", "/s/", submission=True) == "<html><script>x</script>"


def test_feedback_pages_carry_a_policy_before_anything_else():
    page = with_policy(render("feedback"))
    head = page[page.index("<head>"):]
    assert head.startswith(f'<head>\n<meta http-equiv="Content-Security-Policy" content="{PAGE_POLICY}">')
    assert "script-src" not in PAGE_POLICY and "default-src 'none'" in PAGE_POLICY
    assert with_policy("<p>no head</p>") is None


def test_the_config_and_the_instructor_view_put_both_in_place():
    config = (ROOT / "nbgrader_config.py").read_text()
    assert "c.HTMLExporter.preprocessors = [SafeNotebookHTML]" in config
    view = json.loads((ROOT / ".jupyter" / "instructor" / "jupyter_server_config.json").read_text())
    assert view["ServerApp"]["jpserver_extensions"] == {"nbgrader.server_extensions.formgrader": False,
                                                        "course_tools.grading.formgrader_guard": True}


def test_the_guard_adds_the_sanitizer_to_an_exporter_without_it_once():
    exporter = HTMLExporter()
    guard.harden_exporter(exporter)
    guard.harden_exporter(exporter)
    assert sum(isinstance(p, SafeNotebookHTML) for p in exporter._preprocessors) == 1
