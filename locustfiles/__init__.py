"""The load side: Locust user classes, their event hooks, and everything one streaming request needs.

``sglang.py`` is the locustfile users run (``locust -f locustfiles/sglang.py``). A user (``user.py``) sends
one streaming request through a dialect (``dialects.py``: SGLang ``/generate``, OpenAI ``/v1/completions``
and ``/v1/chat/completions``), reads the stream (``sse.py``, ``streams.py``) and turns it into one record
(``recorder.py``) written to ``records.jsonl`` as it ends. ``hooks.py`` ties the run's lifecycle (settings,
preflight, server metrics sampling, distributed messages) to Locust's events, through one class per process role
(``runhooks.py``, ``coordinatorhooks.py``, ``masterhooks.py``, ``workerhooks.py``).
"""
