"""The course's helper library: one module per technique.

Import the module a chapter teaches (``from helpers import device``); nothing
here runs on import (no seeding, no device probing), so importing is cheap and
has no side effects.

This package is what a learner has: the teaching modules and ``helpers.checks`` (what grade cells
import). The instructor's and maintainer's tooling is ``course_tools``, which stands on this package;
nothing here imports it. The floors the modules stand on are declared once, as import-linter contracts
in ``pyproject.toml``; ARCHITECTURE.md explains them.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
