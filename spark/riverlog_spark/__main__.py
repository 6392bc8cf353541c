"""``python -m riverlog_spark`` and the script spark-submit runs (``spark-submit .../__main__.py run ...``)."""

from riverlog_spark.cli import main

raise SystemExit(main())
