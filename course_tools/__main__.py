"""``python -m course_tools COMMAND`` (also the ``course`` script): see :mod:`course_tools.cli`."""

import sys

from course_tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
