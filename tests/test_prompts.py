"""Tests for the prompt sets and loader: the built-in set must stay diverse, user files must load or
fail with a one-line error, and the order must be identical across runs and concurrency levels."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from specbench.locustfiles.prompts import (
    BUILTIN_DIR,
    DEFAULT_FIXED_ID,
    Prompt,
    PromptError,
    PromptOrder,
    PromptSet,
    available_sets,
    load_prompts,
)

EXPECTED_CATEGORIES = {
    "explanation",
    "code",
    "math",
    "summarization",
    "creative",
    "chat",
    "translation",
    "extraction",
}


@pytest.fixture(scope="module")
def diverse() -> PromptSet:
    return load_prompts("diverse")


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --- built-in set -----------------------------------------------------------------------------------


def test_builtin_set_is_listed() -> None:
    assert "diverse" in available_sets()


def test_builtin_counts(diverse: PromptSet) -> None:
    assert len(diverse) >= 200
    counts = diverse.category_counts()
    assert set(counts) >= EXPECTED_CATEGORIES
    assert len(counts) >= 8
    assert all(n >= 25 for n in counts.values()), counts
    assert diverse.categories() == sorted(counts)


def test_builtin_ids_unique_and_well_formed(diverse: PromptSet) -> None:
    ids = [p.id for p in diverse.prompts]
    assert len(ids) == len(set(ids))
    for p in diverse.prompts:
        prefix, _, number = p.id.rpartition("-")
        assert prefix == p.category and len(number) == 3 and number.isdigit(), p.id


def test_builtin_length_spread(diverse: PromptSet) -> None:
    chars = sorted(p.approx_chars for p in diverse.prompts)
    assert chars[0] < 40
    assert chars[-1] > 6000
    assert chars[-1] <= 8500  # about 2,000 tokens at most
    assert sum(c > 3000 for c in chars) >= 10
    assert chars[len(chars) // 2] < 1000  # mostly short-to-medium


def test_builtin_relativity_prompt(diverse: PromptSet) -> None:
    p = diverse.get("explanation-000")
    assert p.text == "Explain the theory of general relativity in detail."
    assert p.category == "explanation"


def test_builtin_chat_prompts_end_with_user(diverse: PromptSet) -> None:
    chats = [p for p in diverse.prompts if p.category == "chat"]
    assert chats
    for p in chats:
        assert p.messages is not None and p.text is None
        roles = [m["role"] for m in p.messages]
        assert roles[-1] == "user", p.id
        assert roles.count("user") >= 2 and "assistant" in roles, p.id  # multi-turn
    for p in diverse.prompts:
        if p.category != "chat":
            assert p.text is not None and p.messages is None, p.id


def test_builtin_no_repeated_paragraphs(diverse: PromptSet) -> None:
    """Long passages must be written, not padded by repeating text."""
    paragraphs = Counter(
        para.strip() for p in diverse.prompts for para in p.as_text().split("\n\n") if len(para.strip()) > 200
    )
    assert [para[:60] for para, n in paragraphs.items() if n > 1] == []


def test_builtin_file_is_one_object_per_line() -> None:
    lines = (BUILTIN_DIR / "diverse.jsonl").read_text(encoding="utf-8").splitlines()
    for line in lines:
        obj = json.loads(line)
        assert set(obj) in ({"id", "category", "prompt"}, {"id", "category", "messages"})


# --- Prompt -----------------------------------------------------------------------------------------


def test_prompt_text_and_messages_conversions() -> None:
    p = Prompt(id="a", category="c", text="Hello there")
    assert p.as_text() == "Hello there"
    assert p.as_messages() == [{"role": "user", "content": "Hello there"}]
    assert p.approx_chars == len("Hello there")
    assert not p.is_chat

    msgs = (
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Name a prime."},
    )
    c = Prompt(id="b", category="chat", messages=msgs)
    assert c.as_text() == "System: Be brief.\nUser: Hi\nAssistant: Hello!\nUser: Name a prime.\nAssistant:"
    out = c.as_messages()
    assert out == list(msgs)
    out[0]["content"] = "mutated"
    assert c.messages is not None and c.messages[0]["content"] == "Be brief."
    assert c.approx_chars == len("Be brief.") + len("Hi") + len("Hello!") + len("Name a prime.")
    assert c.is_chat
    assert hash(c) == hash(Prompt(id="b", category="chat", messages=msgs))


def test_prompt_requires_exactly_one_of_text_and_messages() -> None:
    with pytest.raises(ValueError):
        Prompt(id="a", category="c")
    with pytest.raises(ValueError):
        Prompt(id="a", category="c", text="x", messages=({"role": "user", "content": "x"},))


# --- user files -------------------------------------------------------------------------------------


def test_load_user_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        json.dumps({"id": "one", "category": "qa", "prompt": "What is 2+2?"})
        + "\n\n"
        + json.dumps({"prompt": "No id or category here", "max_tokens": 5})
        + "\n"
        + json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "yo"},
                    {"role": "user", "content": "bye"},
                ]
            }
        )
        + "\n",
        encoding="utf-8",
    )
    s = load_prompts(str(path))
    assert s.name == "mine"
    assert [p.id for p in s.prompts] == ["one", "mine-3", "mine-4"]
    assert [p.category for p in s.prompts] == ["qa", "uncategorized", "uncategorized"]
    assert s.prompts[2].messages is not None and s.prompts[2].messages[-1]["content"] == "bye"
    assert load_prompts(path).sha256 == s.sha256  # Path objects work too


def test_load_sharegpt(tmp_path: Path) -> None:
    data = [
        {
            "id": "conv-a",
            "conversations": [
                {"from": "system", "value": "You are terse."},
                {"from": "human", "value": "Hi"},
                {"from": "gpt", "value": "Hello."},
                {"from": "human", "value": "Tell me a joke."},
                {"from": "gpt", "value": "No."},
            ],
        },
        {"conversations": []},  # empty: skipped
        {"conversations": [{"from": "gpt", "value": "Only the model speaks."}]},  # nothing left: skipped
        {"conversations": [{"from": "human", "value": "Just one question"}]},
    ]
    path = tmp_path / "share.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    s = load_prompts(str(path))
    assert s.skipped == 2
    assert [p.id for p in s.prompts] == ["conv-a", "share-3"]
    first = s.prompts[0]
    # a recorded conversation (#28): the first user turn is the prompt, the later user turns are kept in order
    assert first.as_messages() == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi"},
    ]
    assert first.recorded_turns == ("Tell me a joke.",)
    assert s.prompts[1].as_messages() == [{"role": "user", "content": "Just one question"}]
    assert all(p.category == "uncategorized" for p in s.prompts)


def test_sharegpt_and_jsonl_with_same_content_hash_equal(tmp_path: Path) -> None:
    share = tmp_path / "a.json"
    share.write_text(json.dumps([{"id": "x", "conversations": [{"from": "human", "value": "Q?"}]}]), "utf-8")
    jsonl = write_jsonl(tmp_path / "b.jsonl", [{"id": "x", "messages": [{"role": "user", "content": "Q?"}]}])
    assert load_prompts(str(share)).sha256 == load_prompts(str(jsonl)).sha256


BAD_JSONL_CASES = [
    ('{"prompt": "ok"}\n{"prompt": "broken"\n', 2, "invalid JSON"),
    ('{"prompt": "ok"}\n["a list"]\n', 2, "expected a JSON object"),
    ('{"prompt": "ok"}\n{"text": "wrong key"}\n', 2, 'expected a "prompt" string or a "messages" list'),
    ('{"prompt": ""}\n', 1, '"prompt" to be a non-empty string'),
    ('{"prompt": 42}\n', 1, '"prompt" to be a non-empty string'),
    ('{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}\n', 1, "not both"),
    ('{"messages": []}\n', 1, '"messages" to be a non-empty list'),
    ('{"messages": "hello"}\n', 1, '"messages" to be a non-empty list'),
    ('{"messages": ["hello"]}\n', 1, 'messages[0]: expected an object with "role" and "content"'),
    ('{"messages": [{"role": "bot", "content": "x"}]}\n', 1, "role to be one of system, user, assistant"),
    ('{"messages": [{"role": "user", "content": 3}]}\n', 1, '"content" to be a non-empty string'),
    (
        # (one ending with the model's answer is a recorded conversation, #28: see test_recorded_conversations)
        '{"messages": [{"role": "user", "content": "q"}, {"role": "system", "content": "a"}]}\n',
        1,
        "end with a user turn",
    ),
    ('{"id": "", "prompt": "x"}\n', 1, '"id" to be a non-empty string'),
    ('{"id": ["x"], "prompt": "x"}\n', 1, '"id" to be a non-empty string'),
    ('{"category": 7, "prompt": "x"}\n', 1, '"category" to be a non-empty string'),
    ('{"id": "a", "prompt": "x"}\n\n{"id": "a", "prompt": "y"}\n', 3, "duplicate id 'a' (already used on line 1)"),
]


@pytest.mark.parametrize(("content", "line", "expected"), BAD_JSONL_CASES)
def test_bad_jsonl_names_file_line_and_expectation(tmp_path: Path, content: str, line: int, expected: str) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(PromptError) as exc:
        load_prompts(str(path))
    msg = str(exc.value)
    assert f"prompts.jsonl line {line}:" in msg
    assert expected in msg


BAD_SHAREGPT_CASES = [
    ([{"conversations": [{"from": "human", "value": "ok"}]}, "nope"], 1, 'expected an object with a "conversations"'),
    ([{"conversations": "nope"}], 0, '"conversations" to be a list'),
    ([{"conversations": [{"from": "alien", "value": "x"}]}], 0, '"from" to be human, gpt or system'),
    ([{"conversations": [{"from": "human", "value": None}]}], 0, '"value" to be a string'),
    ([{"conversations": ["hi"]}], 0, 'conversations[0]: expected an object with "from" and "value"'),
    (
        [
            {"id": "d", "conversations": [{"from": "human", "value": "a"}]},
            {"id": "d", "conversations": [{"from": "human", "value": "b"}]},
        ],
        1,
        "duplicate id 'd' (already used by entry 0)",
    ),
]


@pytest.mark.parametrize(("data", "index", "expected"), BAD_SHAREGPT_CASES)
def test_bad_sharegpt_names_file_entry_and_expectation(tmp_path: Path, data: list, index: int, expected: str) -> None:
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(PromptError) as exc:
        load_prompts(str(path))
    msg = str(exc.value)
    assert f"chats.json entry {index}:" in msg
    assert expected in msg


def test_invalid_sharegpt_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "chats.json"
    path.write_text('[\n  {"conversations": []},\n  {oops}\n]\n', encoding="utf-8")
    with pytest.raises(PromptError, match=r"chats\.json: invalid JSON .* line 3"):
        load_prompts(str(path))


@pytest.mark.parametrize("content", ["", "\n\n  \n", "[]", '[{"conversations": []}]'])
def test_empty_sets_are_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(PromptError, match=r"empty\.jsonl: no prompts found"):
        load_prompts(str(path))


def test_unknown_builtin_lists_available_names() -> None:
    with pytest.raises(PromptError) as exc:
        load_prompts("no-such-set")
    assert "no-such-set" in str(exc.value)
    assert "diverse" in str(exc.value)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(PromptError, match="no such file"):
        load_prompts(str(tmp_path / "absent.jsonl"))
    with pytest.raises(PromptError, match="is a directory"):
        load_prompts(str(tmp_path))
    with pytest.raises(PromptError, match="empty prompt set name"):
        load_prompts("  ")


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"prompt": "café"}\n'.encode("latin-1"))
    with pytest.raises(PromptError, match=r"latin1\.jsonl line 1: not UTF-8 text \(bad byte at column 16\)"):
        load_prompts(str(path))


@pytest.mark.parametrize(("content", "said"), [
    ('{"prompt": "a\\ud800b"}\n', r"line 1: a lone UTF-16 surrogate escape"),
    ('{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}\n", r"line 1: JSON nested too deeply"),
    ("[" * 100_000 + "]" * 100_000, r"odd\.jsonl: JSON nested too deeply"),  # read as ShareGPT
])
def test_hostile_json_is_one_line_naming_the_place(tmp_path: Path, content: str, said: str) -> None:
    """Before: a traceback (UnicodeEncodeError when the set was hashed; RecursionError in the parser)."""
    path = tmp_path / "odd.jsonl"
    path.write_text(content)
    with pytest.raises(PromptError, match=said):
        load_prompts(str(path))


def test_a_surrogate_pair_escape_is_text_and_loads(tmp_path: Path) -> None:
    path = tmp_path / "emoji.jsonl"
    path.write_text('{"prompt": "a\\ud83d\\ude00b"}\n')
    assert load_prompts(str(path)).prompts[0].text == "a\U0001F600b"


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    from specbench.locustfiles.promptfile import MAX_FILE_BYTES

    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:  # sparse: no disk is used
        f.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(PromptError, match=r"huge\.jsonl: 1\.0 GiB; a prompt file is held in memory"):
        load_prompts(str(path))


def test_a_bad_first_line_fails_without_reading_the_rest(tmp_path: Path) -> None:
    """A 900 MB file whose first line is not JSON: refused with the memory of a small one (peak RSS of a fresh
    interpreter that loads it), not after reading it whole (twice its size, before)."""
    path = tmp_path / "big.jsonl"
    with path.open("wb") as f:
        f.write(b"not json\n")
        f.truncate(900 * 2**20)  # sparse
    probe = ("import sys\nfrom specbench.locustfiles.prompts import load_prompts\n"
             "from specbench.locustfiles.promptset import PromptError\n"
             "try:\n    load_prompts(sys.argv[1])\nexcept PromptError as e:\n    print(e)\n"
             # VmHWM: this interpreter's own peak (ru_maxrss would keep the forking pytest worker's across exec)
             "print(next(int(ln.split()[1]) for ln in open('/proc/self/status') if ln.startswith('VmHWM')) // 1024)\n")
    out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1], check=True).stdout.splitlines()
    assert "big.jsonl line 1: invalid JSON" in out[0], out
    assert int(out[1]) < 300, f"peak RSS {out[1]} MB"


def test_prompt_error_is_value_error() -> None:
    assert issubclass(PromptError, ValueError)


# --- sha256 -----------------------------------------------------------------------------------------


def test_sha256_stable_and_path_independent(tmp_path: Path, diverse: PromptSet) -> None:
    assert load_prompts("diverse").sha256 == diverse.sha256
    copy = tmp_path / "renamed-copy.jsonl"
    shutil.copy(BUILTIN_DIR / "diverse.jsonl", copy)
    loaded = load_prompts(str(copy))
    assert loaded.name == "renamed-copy"
    assert loaded.sha256 == diverse.sha256
    assert len(diverse.sha256) == 64


def test_sha256_ignores_generated_ids(tmp_path: Path) -> None:
    rows = [{"prompt": "alpha"}, {"prompt": "beta"}]
    a = load_prompts(str(write_jsonl(tmp_path / "one.jsonl", rows)))
    b = load_prompts(str(write_jsonl(tmp_path / "two.jsonl", rows)))
    assert a.prompts[0].id != b.prompts[0].id
    assert a.sha256 == b.sha256


def test_sha256_content_sensitive(tmp_path: Path) -> None:
    base = [{"id": "a", "category": "x", "prompt": "alpha"}, {"id": "b", "category": "x", "prompt": "beta"}]
    h = load_prompts(str(write_jsonl(tmp_path / "p.jsonl", base))).sha256
    variants = [
        [{**base[0], "prompt": "alphA"}, base[1]],  # text
        [{**base[0], "category": "y"}, base[1]],  # category
        [{**base[0], "id": "c"}, base[1]],  # explicit id
        [base[1], base[0]],  # order
        base[:1],  # membership
    ]
    for i, rows in enumerate(variants):
        assert load_prompts(str(write_jsonl(tmp_path / f"v{i}.jsonl", rows))).sha256 != h, rows


# --- PromptOrder ------------------------------------------------------------------------------------


def test_order_deterministic_by_seed(diverse: PromptSet) -> None:
    n = len(diverse)
    a = [p.id for p in PromptOrder(diverse, seed=7).peek(n)]
    b = [p.id for p in PromptOrder(load_prompts("diverse"), seed=7).peek(n)]
    c = [p.id for p in PromptOrder(diverse, seed=8).peek(n)]
    assert a == b
    assert a != c
    assert sorted(a) == sorted(p.id for p in diverse.prompts)  # a permutation
    assert a != [p.id for p in diverse.prompts]  # actually shuffled


def test_order_does_not_touch_global_random(diverse: PromptSet) -> None:
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    PromptOrder(diverse, seed=1)
    assert random.random() == expected


def test_next_follows_peek_and_cycles(diverse: PromptSet) -> None:
    order = PromptOrder(diverse, seed=3)
    n = len(diverse)
    first = order.peek(n)
    assert order.issued == 0  # peek does not advance
    got = [order.next() for _ in range(2 * n + 5)]
    assert [s for s, _ in got] == list(range(2 * n + 5))
    assert [p for _, p in got[:n]] == first
    assert [p for _, p in got[n : 2 * n]] == first  # cycles the same shuffled list
    assert order.peek(3) == first[:3]
    assert order.order == tuple(first)


def test_shared_cursor_under_concurrency(diverse: PromptSet) -> None:
    """N calls from many threads consume exactly the first N sequence numbers of the order."""
    order = PromptOrder(diverse, seed=11)
    expected = order.peek(500)
    results: list[tuple[int, Prompt]] = []
    lock = threading.Lock()

    def user() -> None:
        for _ in range(50):
            item = order.next()
            with lock:
                results.append(item)

    threads = [threading.Thread(target=user) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.sort(key=lambda r: r[0])
    assert [s for s, _ in results] == list(range(500))
    assert [p for _, p in results] == expected


def test_fixed_mode_defaults_to_relativity_prompt(diverse: PromptSet) -> None:
    order = PromptOrder(diverse, seed=5, mode="fixed")
    assert order.fixed_id == DEFAULT_FIXED_ID
    got = [order.next() for _ in range(20)]
    assert [s for s, _ in got] == list(range(20))
    assert {p.id for _, p in got} == {"explanation-000"}


def test_fixed_mode_with_id_and_fallback(tmp_path: Path, diverse: PromptSet) -> None:
    order = PromptOrder(diverse, mode="fixed", fixed_id="code-001")
    assert {order.next()[1].id for _ in range(5)} == {"code-001"}
    with pytest.raises(PromptError, match="no prompt with id 'nope'"):
        PromptOrder(diverse, mode="fixed", fixed_id="nope")

    s = load_prompts(str(write_jsonl(tmp_path / "p.jsonl", [{"prompt": f"q{i}"} for i in range(10)])))
    for seed in (0, 1, 2):
        fixed = PromptOrder(s, seed=seed, mode="fixed")
        assert fixed.peek(3) == [PromptOrder(s, seed=seed).peek(1)[0]] * 3  # first of the shuffle


def test_stride_offset_partition_covers_order_once(diverse: PromptSet) -> None:
    total = 3 * len(diverse) + 7
    single = PromptOrder(diverse, seed=2)
    reference = [single.next() for _ in range(total)]
    for k in (1, 2, 3, 5):
        merged: list[tuple[int, Prompt]] = []
        for i in range(k):
            worker = PromptOrder(diverse, seed=2, stride=k, offset=i)
            mine = [worker.next() for _ in range(len(range(i, total, k)))]
            assert [s for s, _ in mine] == list(range(i, total, k))
            assert worker.peek(2) == [single.at(i), single.at(i + k)]
            merged.extend(mine)
        merged.sort(key=lambda r: r[0])
        assert merged == reference


def test_reset_rewinds(diverse: PromptSet) -> None:
    order = PromptOrder(diverse, seed=4)
    first = [order.next() for _ in range(5)]
    order.reset()
    assert [order.next() for _ in range(5)] == first


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "random"},
        {"stride": 0},
        {"stride": 2, "offset": 2},
        {"offset": -1},
        {"fixed_id": "code-001"},  # fixed_id without fixed mode
    ],
)
def test_order_rejects_bad_arguments(diverse: PromptSet, kwargs: dict) -> None:
    with pytest.raises(PromptError):
        PromptOrder(diverse, **kwargs)


def test_summary(diverse: PromptSet) -> None:
    s = diverse.summary()
    assert s["count"] == len(diverse)
    assert s["sha256"] == diverse.sha256
    assert s["chars_min"] < 40 < s["chars_median"] < s["chars_max"]
    json.dumps(s)


def test_module_does_not_import_locust() -> None:
    """Loading prompts, with every module it draws on (the set types, the file reader, the generated set), leaves
    Locust and gevent unloaded: checked in a fresh interpreter, so what this test process imported does not count."""
    code = ("import sys, locustfiles.prompts; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('locust', 'gevent')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout
