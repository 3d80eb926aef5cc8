"""nbgrader glue for instructors: safe release, class grading, feedback, export.

Not a technique: nothing in a chapter imports it. ``nbgrader_config.py`` loads
its preprocessors, and ``python -m helpers release|grade|feedback|export``
drives it.
"""
