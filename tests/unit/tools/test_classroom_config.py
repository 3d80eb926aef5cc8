"""The classroom's settings, as data: the hub's configuration and the permissions plan (no users, no hub).

tests/e2e/test_classroom.py and tests/e2e/test_hub.py run them for real with Unix users; these say what is set and why
it matters, on any machine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from traitlets.config import Config

from course_tools.classroom import hub, permissions
from conftest import ROOT_SKIP_REASON
from course_tools.cli import main as cli

ME = __import__("pwd").getpwuid(os.getuid()).pw_name


def settings(tmp_path) -> hub.Settings:
    return hub.Settings(exchange=Path("/srv/nbgrader/exchange"),
                        courses={"gpu-pytorch": tmp_path / "course", "gpu-pytorch-ko": tmp_path / "course" / "ko"},
                        instructor="teacher", learners=["alice", "bob"], graders=["ta"], state=tmp_path / "hub")


def test_every_course_id_gets_a_formgrader_only_its_graders_reach(tmp_path):
    c = Config()
    hub.configure(c, settings(tmp_path))
    services = {s["name"]: s for s in c.JupyterHub.services}
    assert set(services) == {"gpu-pytorch", "gpu-pytorch-ko"}
    assert all(s["user"] == "teacher" and s["environment"]["COURSE_ID"] == name for name, s in services.items())
    assert services["gpu-pytorch-ko"]["cwd"].endswith("course/ko")
    assert len({s["url"] for s in services.values()}) == 2, "two services on one port"
    roles = {r["name"]: r for r in c.JupyterHub.load_roles}
    assert roles["formgrade-gpu-pytorch"]["scopes"] == ["access:services!service=gpu-pytorch"]
    assert c.JupyterHub.load_groups["formgrade-gpu-pytorch"]["users"] == ["ta", "teacher"]
    assert "alice" not in c.JupyterHub.load_groups["formgrade-gpu-pytorch-ko"]["users"]
    assert "alice" in c.JupyterHub.load_groups["nbgrader-gpu-pytorch-ko"]["users"]
    assert c.Authenticator.allowed_users == {"alice", "bob", "ta", "teacher"}


def test_learners_get_the_learner_view_the_exchange_and_a_private_umask(tmp_path, monkeypatch):
    s = settings(tmp_path)
    c = Config()
    hub.configure(c, s)
    assert c.JupyterHub.spawner_class is hub.ClassroomSpawner
    path = c.Spawner.environment["JUPYTER_CONFIG_PATH"].split(os.pathsep)
    assert path == [str(s.learner_config), str(s.learner_view)]
    assert not any(str(hub.REPO) in p for p in path), "learners pointed into the hub's own checkout"
    assert c.Spawner.cmd == [str(s.learner_python), "-m", "jupyterhub.singleuser"]
    hub.write_learner_files(s)
    assert "c.Exchange.root = '/srv/nbgrader/exchange'" in (s.learner_config / "nbgrader_config.py").read_text()
    assert (s.learner_view / "jupyter_server_config.json").read_text() == (
        hub.VIEWS / "learner" / "jupyter_server_config.json").read_text()
    for path in [s.share, *s.share.rglob("*")]:  # every learner reads them; the hub's state stays root's
        assert path.stat().st_mode & 0o005 == (0o005 if path.is_dir() else 0o004), path
    assert not s.share.is_relative_to(s.state)
    spawner = hub.ClassroomSpawner()
    monkeypatch.setattr(hub.LocalProcessSpawner, "make_preexec_fn", lambda self, name: lambda: None)
    seen = []
    monkeypatch.setattr(hub.os, "umask", seen.append)
    spawner.make_preexec_fn("alice")()
    assert seen == [0o077]


def test_the_settings_file_is_checked_with_a_message_that_says_where_to_look(tmp_path):
    bad = tmp_path / "classroom.json"
    bad.write_text('{"exchange": "/srv/x"}')
    with pytest.raises(SystemExit, match="classroom.example.json"):
        hub.Settings.load(bad)


def test_the_example_settings_load_and_dry_run_prints_the_config(capsys):
    example = Path(hub.__file__).with_name("classroom.example.json")
    assert hub.Settings.load(example).courses
    assert cli(["classroom", "hub", "--settings", str(example), "--dry-run"]) == 0
    assert "c.JupyterHub.services" in capsys.readouterr().out


def test_the_plan_makes_the_exchange_sticky_and_the_course_and_homes_private(tmp_path):
    rules = permissions.plan(tmp_path / "exchange", {"gpu-pytorch": tmp_path / "course"}, ME, [ME])
    modes = {str(r.path.relative_to(tmp_path)) if r.path.is_relative_to(tmp_path) else "home": r.mode for r in rules}
    assert modes["exchange"] == 0o1777
    assert modes["exchange/gpu-pytorch/inbound"] == 0o3733
    assert modes["course"] == 0o700 and modes["home"] == 0o700
    assert any("is missing" in p for p in permissions.problems(rules))


def test_check_reports_a_world_writable_exchange_without_sticky_bit(tmp_path):
    (tmp_path / "exchange").mkdir()
    (tmp_path / "exchange").chmod(0o777)
    rule = permissions.Rule(tmp_path / "exchange", ME, 0o1777, why="sticky")
    assert "has mode 0777, not 1777" in rule.problem()


def test_the_kubernetes_values_pass_the_charts_schema_and_keep_the_classrooms_rules(tmp_path):
    from course_tools.classroom import z2jh

    found = z2jh.values(settings(tmp_path))
    assert z2jh.problems(found) == []
    config = found["singleuser"]["extraFiles"]["nbgrader-config"]["stringData"]
    assert "configureExchange" in config and "Exchange.root" not in config, "a shared folder exchange on Kubernetes"
    assert found["singleuser"]["storage"]["type"] == "dynamic"
    assert found["hub"]["config"]["JupyterHub"]["authenticator_class"] not in ("dummy", "null")
    groups = found["hub"]["extraConfig"]["00-course-groups"]
    assert '"formgrade-gpu-pytorch-ko": {"users": ["ta", "teacher"]}' in groups
    views = {f["mountPath"] for f in found["singleuser"]["extraFiles"].values()}
    assert "/etc/jupyter/course-learner/jupyter_server_config.json" in views


def test_the_schema_check_can_fail(tmp_path):
    from course_tools.classroom import z2jh

    found = z2jh.values(settings(tmp_path))
    found["singleuser"]["storrage"] = {"type": "none"}  # a typo the chart would silently ignore without the schema
    found["singleuser"]["extraFiles"]["nbgrader-config"].pop("mountPath")
    wrong = z2jh.problems(found)
    assert any("storrage" in w for w in wrong) and any("mountPath" in w for w in wrong), wrong


def test_z2jh_writes_checked_values(tmp_path, capsys):
    example = Path(hub.__file__).with_name("classroom.example.json")
    out = tmp_path / "values.yaml"
    assert cli(["classroom", "z2jh", "--settings", str(example), "--out", str(out)]) == 0
    import yaml

    assert yaml.safe_load(out.read_text())["hub"]["services"]["ngshare"]["url"].startswith("http://ngshare")


def test_passwords_never_cross_the_network_in_clear_text(tmp_path):
    s = settings(tmp_path)
    assert s.tls_problem() is None, "the default listens on 127.0.0.1 only"
    s.ip = "0.0.0.0"
    assert "clear text" in s.tls_problem() and "ssl_cert" in s.tls_problem()
    s.ssl_cert, s.ssl_key = tmp_path / "hub.crt", tmp_path / "hub.key"
    assert s.tls_problem() is None
    c = Config()
    hub.configure(c, s)
    assert (c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key) == (str(s.ssl_cert), str(s.ssl_key))
    s.ssl_cert = s.ssl_key = None
    s.tls_proxy = "nginx at https://gpu.example.edu"
    assert s.tls_problem() is None
    example = hub.Settings.load(Path(hub.__file__).with_name("classroom.example.json"))
    assert example.tls_problem() is None, "the example settings would send passwords in clear text"


def test_the_hub_refuses_to_start_in_clear_text_on_the_network(tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip(ROOT_SKIP_REASON)
    bad = tmp_path / "classroom.json"
    bad.write_text(json.dumps({"exchange": str(tmp_path / "x"), "courses": {}, "instructor": ME, "learners": [],
                               "ip": "0.0.0.0", "state": str(tmp_path / "hub")}))
    assert cli(["classroom", "hub", "--settings", str(bad), "--check"]) == 2
    assert "clear text" in capsys.readouterr().err
