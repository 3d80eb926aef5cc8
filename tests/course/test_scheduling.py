"""How the suite is split over xdist's workers (tests/conftest.py): a chapter's tests of one module are one unit,
everything else as `--dist loadscope` groups it."""

from conftest import chapter_scope


def test_a_chapters_tests_of_one_module_share_a_scope():
    ids = ["tests/course/test_exercises.py::test_reference_solution_passes_every_check[06_multi_gpu]",
           "tests/course/test_exercises.py::test_submission_loses_exactly_its_points[06_multi_gpu/no_set_epoch]",
           "tests/course/test_exercises.py::test_submission_loses_exactly_its_points[06_multi_gpu/a-b_c]"]
    assert {chapter_scope(i) for i in ids} == {"tests/course/test_exercises.py::06_multi_gpu"}
    assert chapter_scope("tests/e2e/test_roundtrip.py::test_mistakes_lose_exactly_their_points_under_nbgrader_as_in_process"
                         "[07_troubleshooting-mistakes2]") == "tests/e2e/test_roundtrip.py::07_troubleshooting"


def test_other_tests_keep_loadscopes_grouping():
    assert chapter_scope("solutions/06_multi_gpu/06_multi_gpu.ipynb::Cell 12") == "solutions/06_multi_gpu/06_multi_gpu.ipynb"
    assert chapter_scope("tests/unit/helpers/test_ddp.py::test_two_ranks[gloo]") == "tests/unit/helpers/test_ddp.py"
    assert chapter_scope("tests/unit/helpers/test_results.py::TestShow::test_it[x]") == "tests/unit/helpers/test_results.py::TestShow"
    assert chapter_scope("tests/course/test_exercises.py::test_every_exercise_has_two_wrong_submissions") == "tests/course/test_exercises.py"
