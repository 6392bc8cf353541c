"""``python -m riverlog_spark``, and the file spark-submit runs (``spark-submit .../__main__.py run ...``).

Run as a file, Python puts this folder first on sys.path, which would make ``cli``, ``session``
and the other modules here importable under bare names; the folder above it (the one holding
the ``riverlog_spark`` package) goes there instead, so the package imports the same way in both
cases, installed or not.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from riverlog_spark.cli import main  # noqa: E402  (after the sys.path fix above)

raise SystemExit(main())
