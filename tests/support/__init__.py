"""What the tests stand on (importable as ``support`` because pyproject.toml puts ``tests/`` on pytest's path).

- ``layout``: where the course's files are (solutions, submissions, notebooks) and how a test runs them: loading
  a chapter, its grade cells, a wrong submission, the in-process cell runner, servers and process groups;
- ``cell_runner``: the program that runs a notebook's cells in process for the exercise checks (also started by
  file path, as a script);
- ``fake_cuda``: a CUDA machine faked for torch, for the chapters' GPU branches on a CPU-only machine;
- ``matrix``: the tiny course and its tamper matrix of submissions, each with its promised outcome;
- ``shared_machine`` and ``classroom``: a scratch exchange, and real Unix users for the classroom tests.
"""
