"""A shared classroom: the permissions a class on one server needs, and a JupyterHub with real Unix users.

``python -m course_tools classroom secure|check|hub`` (``course_tools.classroom.cli``); INSTRUCTORS.md, "A shared
classroom", says when to use which. What collect refuses is nbgrader glue and lives in
``course_tools.grading.class_level.collect``.
"""
