"""How labelled series of one figure combine, per label and per server (contract.server_metrics.combine_series).

Each case is the Prometheus text a server version writes (label sets as in its source), parsed by the same
``parse_metrics`` the sampler uses.
"""

from __future__ import annotations

from specbench.contract.server_metrics import parse_metrics

SCHED = 'model_name="m",engine_type="unified",pp_rank="0",moe_ep_rank="0"'


def _gauge(name: str, rows: list[tuple[str, float]]) -> str:
    return f"# TYPE {name} gauge\n" + "".join(f"{name}{{{labels}}} {value}\n" for labels, value in rows)


def test_priority_total_series_is_taken_alone():
    text = _gauge("sglang:num_running_reqs", [(f'{SCHED},tp_rank="0",priority=""', 10.0),
                                               (f'{SCHED},tp_rank="0",priority="0"', 6.0),
                                               (f'{SCHED},tp_rank="0",priority="1"', 4.0)])
    assert parse_metrics(text, 0.0)["values"]["running"] == 10.0


def test_per_priority_series_without_a_total_add_up():
    text = _gauge("sglang:num_running_reqs", [(f'{SCHED},tp_rank="0",priority="0"', 6.0),
                                               (f'{SCHED},tp_rank="0",priority="1"', 4.0)])
    assert parse_metrics(text, 0.0)["values"]["running"] == 10.0


def test_duplicated_tp_ranks_count_once_and_dp_ranks_add_up():
    tp = _gauge("sglang:num_queue_reqs", [(f'{SCHED},tp_rank="{r}"', 7.0) for r in range(4)])
    assert parse_metrics(tp, 0.0)["values"]["queued"] == 7.0
    dp = _gauge("sglang:num_running_reqs", [(f'{SCHED},tp_rank="{r}",dp_rank="{d}"', 3.0 + d)
                                             for d in range(2) for r in range(2)])
    assert parse_metrics(dp, 0.0)["values"]["running"] == 7.0
    kv = _gauge("sglang:token_usage", [(f'{SCHED},tp_rank="{r}",dp_rank="{d}"', 0.2 + 0.2 * d)
                                        for d in range(2) for r in range(2)])
    assert abs(parse_metrics(kv, 0.0)["values"]["kv_cache_usage"] - 0.3) < 1e-12


def test_vllm_engines_add_up():
    text = _gauge("vllm:num_requests_running", [('model_name="m",engine="0"', 5.0),
                                                 ('model_name="m",engine="1"', 2.0)])
    text += "# TYPE vllm:generation_tokens counter\n"
    text += 'vllm:generation_tokens_total{model_name="m",engine="0"} 100\n'
    text += 'vllm:generation_tokens_total{model_name="m",engine="1"} 50\n'
    values = parse_metrics(text, 0.0)["values"]
    assert (values["running"], values["generation_tokens_total"]) == (7.0, 150.0)


def test_llamacpp_prompt_counter_is_a_different_figure():
    text = "# TYPE llamacpp:prompt_tokens counter\nllamacpp:prompt_tokens_total 42\n"
    values = parse_metrics(text, 0.0)["values"]
    assert values == {"prefill_tokens_total": 42.0}
