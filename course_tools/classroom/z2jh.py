"""Beyond one server: the classroom as Zero to JupyterHub (Kubernetes) values, checked against the chart's schema.

``python -m course_tools classroom z2jh --settings classroom.json --out values.yaml`` writes the values for
the ``jupyterhub`` Helm chart from the same settings as ``classroom hub``. Nothing here can run a cluster: what
is checked (tests/unit/tools/test_classroom_config.py) is that the values, merged over the chart's defaults as Helm merges
them, pass the chart's own ``values.schema.json`` (both vendored in ``z2jh/``, with their provenance) and that
they keep the classroom's rules.

Why a **service exchange** (ngshare) and not the shared folder: on Kubernetes every learner's server runs as the
same Unix user (``jovyan``, uid 1000), so a file's owner cannot tell learners apart, and nbgrader 0.9.6 then
takes ``JUPYTERHUB_USER`` as the submitter's name, which anyone can set (issue 38). ngshare
(``ngshare``/``ngshare_exchange`` on PyPI, its own Helm chart) is a JupyterHub service: it learns who is asking
from the hub's token on each request, so a learner can neither submit as another nor read what is not theirs.
Chosen over nbexchange because ngshare's exchange plugs into nbgrader's ``ExchangeFactory`` with one call
(``configureExchange``) and needs no database server of its own.

Homes are per-learner volumes (``singleuser.storage`` dynamic), so no learner can read another's work; the
graders (the ``formgrade-<course id>`` groups) get the instructor view, everyone else the learner view.
"""

from __future__ import annotations

import json
from pathlib import Path

from course_tools.classroom.hub import VIEWS, Settings

__all__ = ["values", "problems", "SCHEMA", "NGSHARE_URL"]

SCHEMA = Path(__file__).with_name("z2jh") / "values.schema.json"
DEFAULTS = Path(__file__).with_name("z2jh") / "values.defaults.yaml"  # the chart's values.yaml, same commit
NGSHARE_URL = "http://ngshare.default.svc.cluster.local:8080/services/ngshare"

_VIEW_HOOK = """\
def course_view(spawner):
    \"\"\"Graders (a formgrade-<course id> group) get the instructor view; everyone else the learner view.\"\"\"
    grader = any(group.name.startswith("formgrade-") for group in spawner.user.groups)
    spawner.environment["JUPYTER_CONFIG_PATH"] = "/etc/jupyter/course-" + ("instructor" if grader else "learner")

c.KubeSpawner.pre_spawn_hook = course_view
"""


def _view_files(view: str) -> dict:
    """The repository's view (``.jupyter/<view>``) as chart-mounted files: one source for both servers."""
    files = {}
    for path in sorted((VIEWS / view).rglob("*.json")):
        key = f"course-{view}-{path.relative_to(VIEWS / view)}".replace("/", "-").replace(".", "-")
        files[key] = {"mountPath": f"/etc/jupyter/course-{view}/{path.relative_to(VIEWS / view)}",
                      "stringData": path.read_text()}
    return files


def values(s: Settings, ngshare_url: str = NGSHARE_URL, authenticator: str = "github") -> dict:
    """The chart's values for the class: people, groups and roles as on one server, ngshare as the exchange."""
    graders = sorted({s.instructor, *s.graders})
    groups = {"learners": {"users": sorted(s.learners)}, "graders": {"users": graders}}
    roles = {}
    for course_id in sorted(s.courses):
        groups[f"formgrade-{course_id}"] = {"users": graders}
        groups[f"nbgrader-{course_id}"] = {"users": sorted({s.instructor, *s.learners})}
        roles[f"nbgrader-{course_id}"] = {"groups": [f"nbgrader-{course_id}"],
                                          "scopes": ["list:services", f"read:services!service={course_id}"]}
    nbgrader_config = (
        "# the exchange is ngshare, a hub service that knows who asks (course_tools/classroom/z2jh.py)\n"
        "from ngshare_exchange import configureExchange\n"
        "c = get_config()  # noqa: F821\n"
        f"configureExchange(c, {ngshare_url!r})\n")
    return {
        "hub": {
            "config": {
                # set the identity provider's client id and secret in a values file of your own (never here)
                "JupyterHub": {"authenticator_class": authenticator},
                "Authenticator": {"allowed_users": sorted({*graders, *s.learners}), "admin_users": [s.instructor]},
            },
            "loadRoles": roles,
            "services": {"ngshare": {"url": ngshare_url.rsplit("/services/", 1)[0], "oauth_no_confirm": True}},
            "extraConfig": {"00-course-groups": f"c.JupyterHub.load_groups = {json.dumps(groups, sort_keys=True)}\n",
                            "01-course-views": _VIEW_HOOK},
        },
        "singleuser": {
            "defaultUrl": "/lab",
            "storage": {"type": "dynamic"},  # a volume per learner: nobody reads another's home
            "extraFiles": {
                "nbgrader-config": {"mountPath": "/etc/jupyter/nbgrader_config.py", "stringData": nbgrader_config},
                **_view_files("learner"), **_view_files("instructor"),
            },
        },
    }


def _merged(defaults: dict, given: dict) -> dict:
    """Helm's merge of a values file over the chart's defaults: mappings merge key by key, the rest replaces."""
    out = dict(defaults)
    for key, value in given.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def problems(found: dict) -> list[str]:
    """Where ``found``, over the chart's defaults as Helm merges them, breaks the chart's ``values.schema.json``."""
    import jsonschema
    import yaml

    defaults = yaml.safe_load(DEFAULTS.read_text())
    schema = json.loads(SCHEMA.read_text())
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in jsonschema.Draft7Validator(schema).iter_errors(_merged(defaults, found))]


def main(settings_path: Path, out: Path | None) -> int:
    import sys

    import yaml

    found = values(Settings.load(settings_path))
    wrong = problems(found)
    if wrong:
        print("classroom z2jh: the values break the chart's schema:\n  " + "\n  ".join(wrong), file=sys.stderr)
        return 1
    text = "# Zero to JupyterHub values for the course, from " + str(settings_path) + " (python -m course_tools " \
           "classroom z2jh); checked against the chart's values.schema.json\n" + yaml.safe_dump(found, sort_keys=False)
    if out:
        Path(out).write_text(text)
        print(f"wrote {out}: helm upgrade --install jupyterhub jupyterhub/jupyterhub --values {out} "
              "--values your-secrets.yaml; install ngshare's chart first (INSTRUCTORS.md)")
    else:
        print(text)
    return 0
