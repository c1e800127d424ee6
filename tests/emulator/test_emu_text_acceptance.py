"""Draft acceptance by kind of text (``speculative.acceptance.by_text``): the first rule whose string occurs in a
prompt sets the range its alpha is drawn in, over real HTTP as in the cost model; and the truth that
``eagle3-categories`` gives a per-category verdict: code speculation pays alone and loses under load, translation
never pays."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.emulator import costmodel, start_emulator
from specbench.emulator.profile import ProfileError, load_profile

CODE_RANGE, MATHS_RANGE, TRANSLATION_RANGE, BASE_RANGE = (0.88, 0.92), (0.78, 0.84), (0.25, 0.35), (0.4, 0.9)

# Written for these tests: ~40-60 words each, every one matched by its category's rule only.
CODE = [
    "Here is a small helper:\n```python\nimport csv\nrows = list(csv.reader(open('data.csv')))\n```\nRewrite it so "
    "the file is closed after reading, skip the header line, and return a list of dictionaries keyed by column name. "
    "Keep it in the standard library and add a short docstring.",
    "Review this function and point out the bug: def mean(values): return sum(values) / len(values) - it fails "
    "for some input that callers send us every night. Propose a fixed version with type hints, say what it should "
    "return for an empty list, and add two unit tests that pin the behaviour down.",
    "```js\nfunction debounce(fn, ms) { let t; return (...a) => { clearTimeout(t); t = setTimeout(fn, ms, ...a); }; }"
    "\n```\nExplain line by line what this debounce does, why the timer is cleared on every call, and how you would "
    "add a flag that fires the function on the leading edge instead of the trailing one.",
    "Write def parse_duration(text) that turns strings such as 2h30m, 45s or 1h into a number of seconds. It "
    "should reject empty input and unknown units with a clear ValueError, accept upper and lower case letters, and "
    "come with a short table of examples showing inputs and the seconds expected for each.",
]
MATHS = [
    "Solve the system 3x + 2y = 16 and x - y = 2 step by step, showing each substitution, then check the answer by "
    "putting both values back into the two equations. Finish with one sentence on when elimination would be a "
    "quicker route than substitution for a pair of linear equations like these.",
    "A tank holds 1200 litres and drains at 35 litres per minute while a pump refills it at 20 litres per minute. "
    "Please calculate how long until it is empty, show the working in plain steps, and then say how strong the "
    "pump would have to be for the level to stay constant over an hour.",
]
TRANSLATION = [
    "Translate the following paragraph into French, keeping its polite but firm tone: We regret to tell you that "
    "the meeting planned for Thursday has been moved to next week. Please confirm whether the new time suits your "
    "team, and let us know if anyone will join remotely so we can send a link.",
    "Translate into German for a museum sign: This room shows tools used by farmers in the valley two hundred "
    "years ago. Please do not touch the objects. Photographs without flash are welcome. The guided tour starts at "
    "the main hall every hour and lasts about forty minutes.",
    "Translate this short customer review into Spanish and Italian, one after the other: The hotel was quiet and "
    "clean, breakfast was generous, and the staff helped us find a taxi at five in the morning. The only problem was "
    "the slow lift, which made us take the stairs most days.",
]
PLAIN = [
    "Give me a packing list for a four day hiking trip in the mountains in early autumn, when nights can drop close "
    "to freezing and afternoons are still warm. Group the items by purpose, mark the ones that are optional, and "
    "keep the total weight of the pack in mind.",
    "Summarise the main arguments for and against a four day working week for a small company of twenty people, "
    "in a balanced way, then suggest how such a firm could run a three month trial and which figures it should "
    "watch to decide whether to keep the new schedule afterwards.",
]
LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)
FAST = 50.0
MAX_TOKENS = 512


def _rules(*rules: tuple[str, float, float]) -> list[dict[str, Any]]:
    return [{"contains": c, "alpha_min": lo, "alpha_max": hi} for c, lo, hi in rules]


def _inside(alpha: float, bounds: tuple[float, float]) -> bool:
    return bounds[0] <= alpha <= bounds[1]


def test_each_category_draws_in_its_range_and_the_first_rule_wins() -> None:
    spec = load_profile("eagle3-categories").speculative
    assert spec is not None
    for prompts, bounds in ((CODE, CODE_RANGE), (MATHS, MATHS_RANGE), (TRANSLATION, TRANSLATION_RANGE),
                            (PLAIN, BASE_RANGE)):
        assert all(_inside(spec.alpha_for(p), bounds) for p in prompts), bounds
    # Code that is also a translation request: the code rule comes first.
    both = "Translate the comments of this function into English: def somma(a, b): return a + b  # somma due numeri"
    assert _inside(spec.alpha_for(both), CODE_RANGE)
    # Same draw inside a different range: lo + (hi - lo) * the text's hash, as without rules.
    plain = load_profile("eagle3").speculative
    assert plain is not None
    unit = (plain.alpha_for(both) - 0.4) / 0.5
    assert spec.alpha_for(both) == pytest.approx(0.88 + 0.04 * unit)
    # Without rules nothing changes: the prompts=None model keeps the base range.
    assert costmodel.mean_tokens_per_step(load_profile("eagle3-categories"), None, MAX_TOKENS) == pytest.approx(
        costmodel.mean_tokens_per_step(load_profile("eagle3-fair"), None, MAX_TOKENS))


def test_the_served_alpha_follows_the_text_and_a_pin_beats_the_rules(make_http: Any) -> None:
    pinned = CODE[2]  # matches the fence rule, but the pin wins
    # A dict with ``base``, not dotted overrides: a pinned prompt's own dots would split its key.
    rules = _rules(("```", 0.88, 0.92), ("Translate", 0.25, 0.35), ("Translate the", 0.6, 0.6))
    handle = start_emulator({"base": "eagle3-categories", "ledger_text": True, "speculative": {"acceptance": {
        "pinned": {pinned: 0.5}, "by_text": rules}}}, speed=FAST)
    try:
        http = make_http(handle.url)
        sent = [CODE[0], TRANSLATION[0], PLAIN[0], pinned]
        for number, text in enumerate(sent):
            reply = http.stream("/generate", {"text": text, "rid": f"text-{number}", "stream": True,
                                              "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}})
            assert reply.status == 200 and reply.complete
        # A chat's key is its message contents joined: the fence in the user turn matches.
        chat = [{"role": "system", "content": "You review code."}, {"role": "user", "content": CODE[0]}]
        reply = http.stream("/v1/chat/completions", {"model": "m", "messages": chat, "max_tokens": 8,
                                                     "ignore_eos": True, "stream": True})
        assert reply.status == 200 and reply.complete
        records = handle.ledger.wait_for(len(sent) + 1)
        alpha = {r["prompt_text"]: r["spec"]["alpha"] for r in records}
        assert _inside(alpha[CODE[0]], CODE_RANGE)
        assert _inside(alpha[TRANSLATION[0]], TRANSLATION_RANGE)  # the first match, not the later 0.6 rule
        assert _inside(alpha[PLAIN[0]], BASE_RANGE) and not _inside(alpha[PLAIN[0]], CODE_RANGE)
        assert alpha[pinned] == 0.5
        assert _inside(alpha["You review code.\n" + CODE[0]], CODE_RANGE)
        assert all(alpha[text] == handle.profile.speculative.alpha_for(text) for text in sent)  # type: ignore[union-attr]
    finally:
        handle.stop()


def test_a_pin_beats_a_matching_rule() -> None:
    profile = load_profile({"base": "eagle3-categories", "speculative": {"acceptance": {"pinned": {CODE[0]: 0.45}}}})
    assert profile.speculative is not None and profile.speculative.alpha_for(CODE[0]) == 0.45


@pytest.mark.parametrize(("by_text", "key", "expected"), [
    ("code", "speculative.acceptance.by_text", "expected a list"),
    (["```"], "speculative.acceptance.by_text[0]", "must be a mapping"),
    ([*_rules(("```", 0.8, 0.9)), {"alpha_min": 0.1, "alpha_max": 0.2}],
     "speculative.acceptance.by_text[1].contains", "expected a non-empty string"),
    (_rules(("", 0.1, 0.2)), "speculative.acceptance.by_text[0].contains", "expected a non-empty string"),
    ([{"contains": 7, "alpha_min": 0.1, "alpha_max": 0.2}], "speculative.acceptance.by_text[0].contains",
     "expected a non-empty string"),
    ([{"contains": "x", "alpha_min": 0.1, "alpha_max": 0.2, "weight": 1}],
     "speculative.acceptance.by_text[0].weight", "unknown key"),
    ([{"contains": "x", "alpha_max": 0.2}], "speculative.acceptance.by_text[0].alpha_min", "is required"),
    (_rules(("x", -0.1, 0.2)), "speculative.acceptance.by_text[0].alpha_min", "must be >= 0.0 and <= 1.0"),
    (_rules(("x", 0.1, 1.5)), "speculative.acceptance.by_text[0].alpha_max", "must be >= 0.0 and <= 1.0"),
    (_rules(("x", 0.1, 0.2), ("y", 0.3, 0.4), ("z", 0.6, 0.5)), "speculative.acceptance.by_text[2].alpha_max",
     "must be >= alpha_min"),
])
def test_a_bad_rule_is_a_one_line_error_naming_its_key(by_text: object, key: str, expected: str) -> None:
    with pytest.raises(ProfileError) as info:
        load_profile("eagle3-categories", overrides={"speculative.acceptance.by_text": by_text})
    message = str(info.value)
    assert "\n" not in message and f"key '{key}'" in message and expected in message, message


@pytest.mark.parametrize("baseline", ["baseline-uncapped", "baseline"])
def test_the_categories_truth_code_pays_alone_translation_never(baseline: str) -> None:
    spec, base = load_profile("eagle3-categories"), load_profile(baseline)

    def ratio(prompts: list[str], concurrency: int) -> float:
        return costmodel.expected_throughput_for_prompts(spec, concurrency, prompts, MAX_TOKENS) / \
            costmodel.expected_throughput_for_prompts(base, concurrency, prompts, MAX_TOKENS)

    assert ratio(CODE, 1) > 1.0 and ratio(CODE, 250) < 1.0
    assert all(ratio(TRANSLATION, c) < 1.0 for c in LEVELS)
