"""The course's helper library: one module per technique.

Import the module a chapter teaches (``from helpers import device``); nothing
here runs on import (no seeding, no device probing), so importing is cheap and
has no side effects.

Floors (imports only go down):
    face         __main__ (python -m helpers env)
    techniques   amp  dataloader  ddp  troubleshoot
    measuring    benchmark  memory
    ground       device  machine  models  plots  checks
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
