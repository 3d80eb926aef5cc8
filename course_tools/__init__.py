"""The instructor's and maintainer's tooling for the course; learners never need it.

``helpers/`` is what a learner has (the teaching modules and ``helpers/checks/``, which grade cells
import). Everything here works on what only the full repository holds (``solutions/``,
``nbgrader_config.py``, a gradebook, ``tests/``, a GPU machine) and stands above ``helpers``: it may
import ``helpers``, and nothing in ``helpers`` imports it (import-linter's contracts in
``pyproject.toml`` check both). So the student edition is ``helpers/`` + ``notebooks/`` + ``results/``
with nothing to strip.

    grading/     nbgrader glue: safe release, sandboxed class grading with limits, status, feedback, export
    gpu_check/   ``make gpu-check``: the whole course on a real GPU, results/ with provenance
    handout      the student edition (``make handout``)
    colab        the README's Colab badges and each chapter's Colab cell
    cli          ``python -m course_tools COMMAND`` (the ``course`` script), what ``make`` runs

ARCHITECTURE.md says how a submission flows through these modules.
"""

__all__: list[str] = []
