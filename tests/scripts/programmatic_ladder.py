"""Run the suite with Locust as a library (no locust CLI): one Environment, our user, shape and hooks.

Run in its own process by tests/test_library_mode.py, because Locust must monkey-patch before anything imports
ssl. Usage: programmatic_ladder.py HOST OUT_DIR [suite options...]; prints the Locust stats entries as JSON.
"""

from __future__ import annotations

import json
import sys

import locust  # noqa: F401  (first: gevent monkey-patching)
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
from locust.env import Environment
from locust.event import Events

from specbench.locustfiles import hooks
from specbench.locustfiles.sglang import SGLangUser
from specbench.shapes.ladder import ConcurrencyLadder


def main(host: str, out: str, *args: str) -> int:
    parser = get_empty_argument_parser()
    setup_parser_arguments(parser)
    hooks.add_options(parser)
    options = parser.parse_args(["-f", "locustfiles/sglang.py", "--out", out, *args])
    shape = ConcurrencyLadder()
    env = Environment(user_classes=[SGLangUser], shape_class=shape, events=Events(), host=host,
                      parsed_options=options)
    runner = env.create_local_runner()
    installed = hooks.install(env, argv=[])
    runner.start_shape()
    runner.shape_greenlet.join(timeout=120)
    runner.quit()
    installed.on_quitting()
    entries = [{"method": e.method, "name": e.name, "num_requests": e.num_requests}
               for e in env.stats.entries.values()]
    print(json.dumps({"completed": shape.completed, "entries": entries}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
