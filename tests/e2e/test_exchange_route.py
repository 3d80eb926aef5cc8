"""The exchange route for a class on a shared machine or JupyterHub, end to end, with nbgrader's own commands.

The instructor releases 02_devices into the exchange (``python -m course_tools release``, then
``nbgrader release_assignment``); the learner, in another home with only the learner config of
INSTRUCTORS.md, lists, fetches, answers and submits it (``nbgrader list``, ``fetch_assignment``,
``submit``); the instructor collects it (``nbgrader collect``) and grades it
(``python -m course_tools grade``): the learner's answers get full marks in the gradebook. The set-up is
tests/support/shared_machine.py. About 20 s.
"""

import json

import pytest

from course_tools.grading.course import Course
from course_tools.grading.exchange import DEFAULT_COURSE_ID, exchange_settings
from support.shared_machine import LEARNER, set_up, solve


@pytest.mark.slow
def test_release_fetch_submit_collect_grade(tmp_path):
    machine = set_up(tmp_path)
    chapter = machine.chapter
    assert f"{DEFAULT_COURSE_ID} {chapter}" in machine.learner("nbgrader", "list")
    machine.learner("nbgrader", "fetch_assignment", chapter, "--course", DEFAULT_COURSE_ID)
    assert solve(machine.fetched(), chapter) > 0
    machine.learner("nbgrader", "submit", chapter, "--course", DEFAULT_COURSE_ID)
    assert not (machine.course / "submitted").exists(), "nothing reaches the course folder before collect"

    machine.instructor("nbgrader", "collect", chapter)
    assert (machine.course / "submitted" / LEARNER / chapter / f"{chapter}.ipynb").is_file()
    table = machine.instructor("course_tools", "grade", "--assignment", chapter, "--no-progress")
    with Course(machine.course).gradebook() as gb:
        score = gb.find_submission(chapter, LEARNER).score
    assert score == machine.max_score() > 0, table
    assert f"{score:g}/{machine.max_score():g} graded" in table, table


def test_exchange_settings_default_to_a_folder_in_the_course(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_ID", raising=False)
    monkeypatch.delenv("COURSE_EXCHANGE", raising=False)
    course_id, root = exchange_settings(tmp_path)
    assert (course_id, root) == (DEFAULT_COURSE_ID, tmp_path / "exchange")
    assert root.is_dir(), "the default exchange is created, so the Assignments tab has one to list"


def test_exchange_settings_follow_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_ID", "gpu-spring")
    monkeypatch.setenv("COURSE_EXCHANGE", str(tmp_path / "srv"))
    assert exchange_settings(tmp_path / "course") == ("gpu-spring", tmp_path / "srv")
    assert not (tmp_path / "srv").exists(), "a shared exchange is made by its administrator, never here"
    assert not (tmp_path / "course" / "exchange").exists()


def test_the_course_config_sets_course_id_and_exchange_root(tmp_path, monkeypatch):
    """What every nbgrader command and the lab server read from nbgrader_config.py."""
    monkeypatch.setenv("COURSE_EXCHANGE", str(tmp_path / "srv"))
    monkeypatch.delenv("COURSE_ID", raising=False)
    from support.layout import ROOT

    config = Course(ROOT).config
    assert config.CourseDirectory.course_id == DEFAULT_COURSE_ID
    assert config.Exchange.root == str(tmp_path / "srv")
    json.dumps(dict(config.Exchange))  # plain values: nbgrader's server extensions copy the config
