"""How the suite's user shares its turns with Locust's task loop, in a real programmatic run (Locust as a library).

Run in its own process by tests/test_user_turns.py (Locust must monkey-patch first). Usage:
user_turns.py HOST OUT_DIR CASE, CASE one of:

* ``stop``: four users, then Locust's own step down to two with a stop timeout of 60 s: the two stopped users
  finish the request they are in and stop (graceful), so the step down takes about one request, not 60 s;
* ``mixed``: a subclass with a second task of the same weight: Locust still picks between the two;
* ``wait``: a subclass with a 0.3 s wait between tasks: Locust still waits it.

Prints JSON: the step down's duration (``stop``) or the other task's runs (``mixed``).
"""

from __future__ import annotations

import json
import sys
import time

import gevent
import locust  # noqa: F401  (monkey-patches before the suite is imported)
from locust import constant, task
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
from locust.env import Environment
from locust.event import Events

from specbench.locustfiles import hooks
from specbench.locustfiles.sglang import SGLangUser

OTHER_RUNS = [0]


class MixedUser(SGLangUser):
    @task
    def other(self) -> None:
        OTHER_RUNS[0] += 1
        gevent.sleep(0.01)


class WaitingUser(SGLangUser):
    wait_time = constant(0.3)


def main(host: str, out: str, case: str) -> int:
    user_class = {"stop": SGLangUser, "mixed": MixedUser, "wait": WaitingUser}[case]
    parser = get_empty_argument_parser()
    setup_parser_arguments(parser)
    hooks.add_options(parser)
    options = parser.parse_args(["-f", "locustfiles/sglang.py", "--out", out, "--load-mode", "users",
                                 "--max-tokens", "16", "--label", case])
    env = Environment(user_classes=[user_class], events=Events(), host=host, parsed_options=options,
                      stop_timeout=60.0)
    runner = env.create_local_runner()
    installed = hooks.install(env, argv=[])
    result: dict[str, float] = {}
    runner.start(4 if case == "stop" else 2, spawn_rate=100)
    gevent.sleep(2.0)
    if case == "stop":
        began = time.monotonic()
        runner.start(2, spawn_rate=100)  # Locust's step down: with a stop timeout, a graceful stop
        while runner.user_count > 2 and time.monotonic() - began < 90:
            gevent.sleep(0.02)
        result["step_down_s"] = time.monotonic() - began
        result["users_after"] = runner.user_count
        gevent.sleep(0.5)
    result["other_runs"] = OTHER_RUNS[0]
    runner.quit()
    installed.on_quitting()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
