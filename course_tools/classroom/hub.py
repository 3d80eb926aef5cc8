"""JupyterHub for a class on one server: real Unix users, the learner view for learners, formgrader for graders.

``python -m course_tools classroom hub --settings classroom.json`` starts it (as root: the hub starts each
learner's server as that learner). The settings file (JSON; an example is ``classroom.example.json`` beside
this module) names the people and the courses:

    exchange      the shared exchange root (``classroom secure`` made it sticky)
    courses       course id -> the instructor's course folder (the English course, and ``ko/`` for Korean)
    instructor    the login that owns the course folders; formgrader runs as this user
    graders       logins (the instructor, teaching assistants) who may open each course's formgrader
    learners      the learners' logins
    ip, port      where the hub listens (default 127.0.0.1:8000); state: where it keeps its database
    hub_port, proxy_api_port   the hub's API and the proxy's, on 127.0.0.1 (default 8081, 8001)
    ssl_cert, ssl_key          the hub's TLS certificate and key (PEM); or
    tls_proxy                  the reverse proxy that terminates TLS in front of the hub (named, e.g.
                               "nginx at https://gpu.example.edu"): then the hub may listen without TLS
    learner_python             the Python learners' servers and kernels run (default: the hub's own); it must
                               import the course from a copy that holds no solutions (the student edition)

What it sets, and why:

- **PAM login with the machine's own accounts** (JupyterHub's default authenticator), only the listed logins:
  every server and every file then belongs to a real user, which is what collect's owner check rests on.
- **Learners' servers** (``ClassroomSpawner``) run ``learner_python -m jupyterhub.singleuser`` as the learner
  with umask 077 (nothing they write is readable by classmates), with the learner view (a copy of
  ``.jupyter/learner``: no formgrader, no Create Assignment) and nbgrader's exchange root from files the hub
  writes where every learner can read them and nothing else lies (``<state>-learners/``). Never the hub's
  own checkout: measured in issue 45, a learner pointed there read ``solutions/`` with every hidden test.
- **Nothing secret within a learner's reach, or no hub**: before it starts, the hub searches the exchange,
  the course folders, its learner files and the source ``learner_python`` imports the course from for any
  solution a learner could read (:mod:`course_tools.classroom.exposure`) and refuses to start on one.
- **No passwords in clear text**: PAM logins travel in the login form, so the hub refuses to listen beyond
  this machine (``ip`` other than loopback) without ``ssl_cert``/``ssl_key`` or a named ``tls_proxy``.
- **One formgrader service per course id** (nbgrader's own JupyterHub layout, ``demos/demo_multiple_classes``):
  a ``jupyterhub-singleuser`` as the instructor in the course folder with the instructor view, reachable only
  by the group ``formgrade-<course id>``; the group ``nbgrader-<course id>`` lists the course for learners.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from course_tools.classroom.permissions import LEARNER_UMASK

__all__ = ["Settings", "configure", "main", "ClassroomSpawner"]

#: the course repository: its Jupyter views (.jupyter/learner, .jupyter/instructor) and npm's node_modules
REPO = Path(__file__).resolve().parents[2]
VIEWS = REPO / ".jupyter"


@dataclass
class Settings:
    exchange: Path
    courses: dict[str, Path]
    instructor: str
    learners: list[str]
    graders: list[str] = field(default_factory=list)
    ip: str = "127.0.0.1"
    port: int = 8000
    hub_port: int = 8081  # the hub's own API, behind the proxy (JupyterHub's default)
    proxy_api_port: int = 8001  # the proxy's REST API, on 127.0.0.1 (JupyterHub's default)
    state: Path = Path("/srv/jupyterhub")
    first_service_port: int = 9990
    learner_python: Path = Path(sys.executable)
    ssl_cert: Path | None = None
    ssl_key: Path | None = None
    tls_proxy: str | None = None

    @classmethod
    def load(cls, path: Path) -> "Settings":
        try:
            raw = json.loads(Path(path).read_text())
            return cls(exchange=Path(raw["exchange"]), courses={k: Path(v) for k, v in raw["courses"].items()},
                       instructor=raw["instructor"], learners=list(raw["learners"]),
                       graders=list(raw.get("graders", [raw["instructor"]])), ip=raw.get("ip", cls.ip),
                       port=int(raw.get("port", cls.port)), state=Path(raw.get("state", cls.state)),
                       hub_port=int(raw.get("hub_port", cls.hub_port)),
                       proxy_api_port=int(raw.get("proxy_api_port", cls.proxy_api_port)),
                       first_service_port=int(raw.get("first_service_port", cls.first_service_port)),
                       learner_python=Path(raw.get("learner_python", sys.executable)),
                       ssl_cert=_path(raw.get("ssl_cert")), ssl_key=_path(raw.get("ssl_key")),
                       tls_proxy=raw.get("tls_proxy") or None)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise SystemExit(f"classroom hub: cannot read the settings {path}: {err!r} "
                             "(see course_tools/classroom/classroom.example.json)") from None

    @property
    def share(self) -> Path:
        """What the hub writes for learners' servers, readable by all (its state folder stays root's only)."""
        return self.state.with_name(self.state.name + "-learners")

    @property
    def learner_config(self) -> Path:
        """The config folder learners' servers read: nbgrader's exchange root."""
        return self.share / "config"

    @property
    def learner_view(self) -> Path:
        """The learner view (a copy of the course's ``.jupyter/learner``): never a path into the hub's checkout."""
        return self.share / "view"

    def tls_problem(self) -> str | None:
        """Why these settings would send PAM passwords in clear text; None when they do not."""
        if self.ssl_cert and self.ssl_key or self.tls_proxy or self.ip in LOOPBACK:
            return None
        return (f"the hub would listen on {self.ip}:{self.port} over plain HTTP, and learners' Unix passwords would "
                "cross the network in clear text: set ssl_cert and ssl_key (PEM files), or put it behind a reverse "
                "proxy that terminates TLS, name it in tls_proxy and listen on 127.0.0.1 (INSTRUCTORS.md, 'A shared "
                "classroom')")


LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def _path(value) -> Path | None:
    return Path(value) if value else None


def _tools() -> dict:
    scripts = Path(sys.executable).parent
    return {"singleuser": str(scripts / "jupyterhub-singleuser"),
            "path": f"{scripts}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"}


def configure(c, s: Settings) -> None:
    """Set the hub's configuration on ``c`` (a traitlets ``Config``), from the class's settings."""
    tools = _tools()
    everyone = sorted({s.instructor, *s.graders, *s.learners})
    c.JupyterHub.ip, c.JupyterHub.port = s.ip, s.port
    if s.ssl_cert and s.ssl_key:
        c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = str(s.ssl_cert), str(s.ssl_key)
    c.JupyterHub.db_url = f"sqlite:///{s.state / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(s.state / "jupyterhub_cookie_secret")
    c.JupyterHub.hub_ip, c.JupyterHub.hub_port = "127.0.0.1", s.hub_port
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{s.proxy_api_port}"
    c.ConfigurableHTTPProxy.pid_file = str(s.state / "proxy.pid")
    proxy = find_proxy()
    if proxy:
        c.ConfigurableHTTPProxy.command = [proxy]
    c.JupyterHub.authenticator_class = "pam"
    c.Authenticator.allowed_users = set(everyone)
    c.JupyterHub.spawner_class = ClassroomSpawner
    c.Spawner.cmd = [str(s.learner_python), "-m", "jupyterhub.singleuser"]
    c.Spawner.default_url = "/lab"
    c.Spawner.environment = {
        "PATH": f"{s.learner_python.parent}{os.pathsep}/usr/bin:/bin",
        "JUPYTER_CONFIG_PATH": f"{s.learner_config}{os.pathsep}{s.learner_view}",
    }
    groups = {"learners": {"users": sorted(s.learners)}, "graders": {"users": sorted({s.instructor, *s.graders})}}
    roles = [{"name": "server", "scopes": ["inherit"]}]  # nbgrader's course list asks the hub as the learner
    services = []
    for n, (course_id, folder) in enumerate(sorted(s.courses.items())):
        groups[f"formgrade-{course_id}"] = {"users": sorted({s.instructor, *s.graders})}
        groups[f"nbgrader-{course_id}"] = {"users": sorted({s.instructor, *s.learners})}
        roles += [{"name": f"formgrade-{course_id}", "groups": [f"formgrade-{course_id}"],
                   "scopes": [f"access:services!service={course_id}"]},
                  {"name": f"nbgrader-{course_id}", "groups": [f"nbgrader-{course_id}"],
                   "scopes": ["list:services", f"read:services!service={course_id}"]}]
        services.append({
            "name": course_id, "url": f"http://127.0.0.1:{s.first_service_port + n}",
            "command": [tools["singleuser"]], "user": s.instructor, "cwd": str(folder), "oauth_no_confirm": True,
            "environment": {"JUPYTERHUB_DEFAULT_URL": "/lab/tree/formgrader", "PATH": tools["path"],
                            "COURSE_ID": course_id, "COURSE_EXCHANGE": str(s.exchange),
                            "JUPYTER_CONFIG_PATH": str(VIEWS / "instructor")},
        })
    c.JupyterHub.load_groups = groups
    c.JupyterHub.load_roles = roles
    c.JupyterHub.services = services


def find_proxy() -> str | None:
    """JupyterHub's proxy (npm's configurable-http-proxy): on PATH, or the course's own node_modules."""
    local = REPO / "node_modules" / ".bin" / "configurable-http-proxy"
    return shutil.which("configurable-http-proxy") or (str(local) if local.exists() else None)


try:  # the hub's own classes exist only where jupyterhub is installed (the course's [test] and [classroom] extras)
    from jupyterhub.spawner import LocalProcessSpawner
except ImportError:  # pragma: no cover - a learner's install has no hub
    LocalProcessSpawner = object


class ClassroomSpawner(LocalProcessSpawner):
    """JupyterHub's local spawner, with the learner's umask set before their server starts (077)."""

    def make_preexec_fn(self, name):
        become = super().make_preexec_fn(name)

        def preexec():
            become()
            os.umask(LEARNER_UMASK)

        return preexec


def write_learner_files(s: Settings) -> None:
    """What every learner's server reads, where every learner can read it: the exchange root and the view."""
    s.share.mkdir(parents=True, exist_ok=True)
    os.chmod(s.share, 0o755)
    s.learner_config.mkdir(exist_ok=True)
    (s.learner_config / "nbgrader_config.py").write_text(textwrap.dedent(f"""\
        # written by `python -m course_tools classroom hub`: where learners fetch and submit
        c = get_config()  # noqa: F821
        c.Exchange.root = {str(s.exchange)!r}
        """))
    shutil.rmtree(s.learner_view, ignore_errors=True)
    shutil.copytree(VIEWS / "learner", s.learner_view, symlinks=False)
    for folder, _, files in os.walk(s.share):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


def learner_source(python: Path) -> Path | None:
    """Where ``python`` imports the course's ``helpers`` from: the source tree around it (an editable install or a
    checkout: the folder with ``pyproject.toml``), else the package folder itself; None if it cannot."""
    import subprocess

    # -I and cwd "/": as a learner's server imports it, not from wherever the hub was started
    proc = subprocess.run([str(python), "-I", "-c", "import helpers; print(helpers.__file__)"], capture_output=True,
                          text=True, timeout=120, cwd="/", env={"PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        return None
    package = Path(proc.stdout.strip()).parent
    return package.parent if (package.parent / "pyproject.toml").is_file() else package


def exposure(s: Settings) -> list[str]:
    """Every solution a learner could read on what the hub gives them, or why it cannot tell."""
    from course_tools.classroom.exposure import exposed_solutions

    source = learner_source(s.learner_python)
    if source is None:
        return [f"{s.learner_python} cannot import the course's helpers: install the student edition for learners "
                "(INSTRUCTORS.md, 'A shared classroom')"]
    return exposed_solutions(s.exchange, s.courses, s.learners, [s.share, source])


def main(settings_path: Path, dry_run: bool = False, check_only: bool = False) -> int:
    s = Settings.load(settings_path)
    if dry_run:
        from traitlets.config import Config

        c = Config()
        configure(c, s)
        for section, values in c.items():
            for key, value in values.items():
                print(f"c.{section}.{key} = {value!r}")
        return 0
    if os.geteuid() != 0:
        print("classroom hub: run it as root (it starts each learner's server as that learner)", file=sys.stderr)
        return 2
    if s.tls_problem():
        print(f"classroom hub: {s.tls_problem()}", file=sys.stderr)
        return 2
    write_learner_files(s)
    found = exposure(s)
    if found:
        print("classroom hub: a learner could read solutions on what the hub gives them; nothing started:\n  "
              + "\n  ".join(found) + "\nServe learners from the student edition (`make handout OUT=/opt/gpu-course`) "
              "with its own environment, as INSTRUCTORS.md 'A shared classroom' says, and keep your checkout 0700.",
              file=sys.stderr)
        return 1
    if check_only:
        print(f"classroom hub: learners' servers would run {s.learner_python}; nothing secret is within their reach")
        return 0
    if not find_proxy():
        print("classroom hub: configurable-http-proxy is missing: run `npm ci` in the course folder "
              "(package.json pins it), or install it with npm", file=sys.stderr)
        return 2
    s.state.mkdir(parents=True, exist_ok=True, mode=0o700)
    config = s.state / "jupyterhub_config.py"
    config.write_text(textwrap.dedent(f"""\
        # written by `python -m course_tools classroom hub` from {Path(settings_path).absolute()}
        from pathlib import Path
        from course_tools.classroom.hub import Settings, configure
        configure(get_config(), Settings.load(Path({str(Path(settings_path).absolute())!r})))  # noqa: F821
        """))
    os.execv(sys.executable, [sys.executable, "-m", "jupyterhub", "-f", str(config)])
