"""``python tests/support/sr_registry_main.py schema-registry ...``: ``riverlog schema-registry``
with the tests' schema parser (the real formats where their modules exist, the stand-in of
``sr_toy_format`` where not). Everything else is the real command."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support.*

from riverlog.cli import schema_registry_cmd  # noqa: E402
from riverlog.cli.main import build_parser  # noqa: E402

from support.sr_toy_format import parse_for_tests  # noqa: E402

if __name__ == "__main__":
    args = build_parser().parse_args(sys.argv[1:])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(schema_registry_cmd.run(args, parser=parse_for_tests))
