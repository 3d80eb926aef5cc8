"""Checking the course on a real GPU, and storing what it measured there (issue 16).

    wheelhouse   the wheels the GPU machine lacks, downloaded here (``make gpu-wheelhouse``)
    run          ``make gpu-check``: refuse without CUDA, install, then env, measurements, bench, the
                 ``gpu`` tests and every solution notebook under nbval on CUDA; results with provenance
    measure      each chapter's GPU figures (``helpers.results.FIGURES``), one process per chapter

Face floor: instructor and maintainer tooling, never imported by a chapter.
"""
