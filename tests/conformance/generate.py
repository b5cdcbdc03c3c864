#!/usr/bin/env python3
"""Generate Airlock's conformance vectors from Inspect AI's own functions.

Every expected value in the files written here is computed by calling the code of
inspect-ai 0.3.285 itself, never by re-implementing it:

- ``render.jsonl``: ``format_function_call(function, arguments, width=sys.maxsize)``
  from ``inspect_ai._util.format``, the rendering that approval and review globs
  are matched against. One line per call:
  ``{"call": {"id", "function", "arguments"}, "rendered": "..."}``. The JSON key
  order of ``arguments`` (and of nested objects) is the order Python iterated.
- ``match.jsonl``: glob matching as ``policy_approver`` does it. Hand-written cases
  run Inspect's real ``policy_approver`` with one ``auto`` approver on ``tools``
  and record whether the call was approved (``{"tools", "rendered", "matches"}``).
  Fuzz cases (``{"tools", "candidate", "matches"}``) take the globs Inspect's
  ``policy_approver`` compiled for ``tools`` and apply ``fnmatch.fnmatch`` to an
  arbitrary candidate string, as ``tool_approvers`` does; a policy matches when any
  of its globs does.
- ``invalid_globs.jsonl``: written only if some fuzz pattern makes Python's ``re``
  raise (``{"tools", "error"}``); such patterns are left out of ``match.jsonl``.
- ``policies/*.yaml`` and ``chains.jsonl``: whole chain outcomes. Each policy file
  is loaded with Inspect's own ``approval_policies_from_config`` /
  ``review_policies_from_config``; each call goes through the real
  ``apply_tool_approval`` / ``apply_tool_review`` inside the ``approval()`` /
  ``review()`` context managers, and the trail is the list of ``ApprovalEvent`` /
  ``ReviewEvent`` objects Inspect wrote to a fresh transcript. Approval steps are
  Inspect's built-in ``auto`` approver; Inspect has no ``auto`` reviewer, so one
  is registered below (``decision="continue"``, explanation
  ``"Automatic decision."``). Each line:
  ``{"policy", "kind", "call", "decision", "explanation", "approver", "trail",
  "steps"}`` where ``approver`` is the name of the step whose answer decided
  (``"policy"`` for Inspect's synthetic answers, ``null`` when no reviewer
  matched) and ``steps`` lists the 0-based indexes of the policy entries that
  were asked, in order.

Output is deterministic (fixed seeds, stable order, ``json.dumps(...,
ensure_ascii=False)``, one object per line, ``\\n`` line ends). Lines may hold raw
U+2028/U+2029/U+0085: split the files on ``\\n`` only. The vectors are generated
with CPython 3.11, whose ``repr()`` uses Unicode 14.0 tables. No string inside a
container uses a code point whose general category (and so printability under
``repr()``) differs between Unicode 14.0 and 18.0, so a renderer built on newer
tables must give the same text.

Re-run from the repository root (offline once inspect-ai is installed):

    python3.11 -m venv .venv
    .venv/bin/pip install inspect-ai==0.3.285
    .venv/bin/python tests/conformance/generate.py
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import random
import sys
import unicodedata
import warnings
from pathlib import Path
from typing import Any

import inspect_ai
from inspect_ai._util.format import format_function_call
from inspect_ai.approval._apply import apply_tool_approval, approval
from inspect_ai.approval._auto import auto_approver
from inspect_ai.approval._policy import (
    ApprovalPolicy,
    approval_policies_from_config,
    policy_approver,
)
from inspect_ai.approval import _policy as approval_policy_module
from inspect_ai.event._approval import ApprovalEvent
from inspect_ai.event._review import ReviewEvent
from inspect_ai.log._transcript import Transcript, init_transcript
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser
from inspect_ai.review import Review, reviewer
from inspect_ai.review import _policy as review_policy_module
from inspect_ai.review._apply import apply_tool_review, review
from inspect_ai.review._policy import review_policies_from_config
from inspect_ai.tool._tool_call import ToolCall, ToolCallView

INSPECT_VERSION = "0.3.285"
OUT = Path(__file__).resolve().parent
POLICY_DIR = OUT / "policies"

# fnmatch compiles patterns with `re`, which warns about things like "possible
# nested set" in a class; the warnings change nothing about the result
warnings.simplefilter("ignore", FutureWarning)


@reviewer(name="auto")
def auto_reviewer(decision: str = "continue"):  # type: ignore[no-untyped-def]
    """Reviewer that always gives `decision` (the review twin of Inspect's `auto`)."""

    async def review_result(message, call, result, output, view, history):  # type: ignore[no-untyped-def]
        return Review(decision=decision, explanation="Automatic decision.")

    return review_result


# ---------------------------------------------------------------------------
# helpers


def line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False) + "\n"


def roundtrip(value: Any) -> Any:
    """The value as a reader of the JSON line sees it."""
    text = json.dumps(value, ensure_ascii=False)
    back = json.loads(text)
    assert json.dumps(back, ensure_ascii=False) == text
    return back


def render(function: str, arguments: dict[str, Any]) -> str:
    return format_function_call(function, arguments, width=sys.maxsize)


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(lines), encoding="utf-8", newline="\n")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# ---------------------------------------------------------------------------
# render.jsonl

# Strings that exercise `'...'` (no escaping at top level) and repr() (inside
# containers). Code points whose printability changed after Unicode 14 are not
# used; unassigned code points are limited to U+0378 and noncharacters, which
# can never be assigned.
STRINGS: list[str] = [
    "",
    "a",
    "ls -la",
    "it's",
    'say "hi"',
    "both ' and \"",
    "'",
    '"',
    "''",
    '""',
    "'\"'",
    "back\\slash",
    "ends with backslash\\",
    "\\",
    "\\'",
    '\\"',
    "C:\\Users\\me\\file.txt",
    "line1\nline2",
    "\n",
    "trailing newline\n",
    "tab\there",
    "cr\rlf\r\n",
    "form\x0cfeed\x0bvtab",
    "bell\x07 esc\x1b[31mred\x1b[0m",
    "nul\x00byte",
    "del\x7f",
    "nel\x85 c1",
    "csi\x9b c1",
    "é",
    "naïve café",
    "日本語テキスト",
    "😀 emoji",
    "👨\u200d👩\u200d👧 family",
    "e\u0301 combining",
    "zero\u200bwidth",
    "bidi\u202eoverride",
    "line\u2028separator",
    "para\u2029separator",
    "nbsp\xa0here",
    "ideographic\u3000space",
    "ogham\u1680space",
    "en\u2002quad",
    "private\ue000use",
    "plane15\U000f0000private",
    "bom\ufeff",
    "soft\xadhyphen",
    "arabic\u061cmark",
    "tag\U000e0041char",
    "variation\ufe0fselector",
    "unassigned\u0378",
    "nonchar\ufffe\uffff",
    "nonchar\ufdd0",
    "last\U0010ffff",
    "surrogate pair 𝔘𝔫𝔦",
    "ascii ~!@#$%^&*()_+`-={}|[]:;<>?,./",
    "x" * 250,
    "long 'quoted' \"mixed\" " * 12,
    "multi\nline\n" * 30,
]

# each C0/C1 control (and DEL) embedded in text
CONTROL_STRINGS = [f"c{ord(c):02x}[{c}]" for c in list(map(chr, range(0x20))) + ["\x7f"]]
C1_STRINGS = [f"c{ord(c):02x}[{c}]" for c in map(chr, range(0x80, 0xA0))]

INTS: list[int] = [
    0,
    1,
    -1,
    42,
    -273,
    2**31 - 1,
    2**31,
    2**53,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64 - 1,
    2**64,
    2**64 + 1,
    -(2**64),
    10**30,
    -(10**40),
    12345678901234567890123456789,
]

FLOATS: list[float] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.1,
    0.5,
    1e-4,
    1e-5,
    0.00012,
    1e15,
    1e16,
    9999999999999998.0,
    123456789012345678.0,
    1.5e300,
    -1.5e-300,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    123.456,
    100000.0,
    3.141592653589793,
    2.5,
    1e22,
    1e21,
    1.1,
    0.3,
    0.1 + 0.2,
    1 / 3,
    -2.5e-7,
]

# raw JSON argument texts: how a reader must interpret numbers as written by
# other JSON producers (exponent forms, a float with a zero fraction, ...)
RAW_ARGUMENTS: list[str] = [
    '{"n": 1E5}',
    '{"n": 1e5}',
    '{"n": 1e+5}',
    '{"n": 1E-5}',
    '{"n": 2.5E-3}',
    '{"n": 1.0e0}',
    '{"n": 0e0}',
    '{"n": -0}',
    '{"n": -0.0}',
    '{"n": 100}',
    '{"n": 1.00000000000000000001}',
    '{"n": 0.1000000000000000055511151231257827}',
    '{"n": 123456789012345678901234567890}',
    '{"n": 1e16}',
    '{"n": 1E300}',
    '{"xs": [1E2, 1e-7, 10, -0, 0.0]}',
    '{"d": {"b": 1E0, "a": 2e1}}',
    '{"s": "\\u00e9\\u0000\\ud83d\\ude00"}',
    '{"xs": ["\\u00e9", "\\ud83d\\ude00", "\\u2028"]}',
    '{"s":"compact","n":1,"f":2.50}',
]


class RenderCases:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0

    def add(self, function: str, arguments: dict[str, Any]) -> None:
        call_id = f"r{self.count:04d}"
        args = roundtrip(arguments)
        rendered = render(function, args)
        self.lines.append(
            line(
                {
                    "call": {"id": call_id, "function": function, "arguments": args},
                    "rendered": rendered,
                }
            )
        )
        self.count += 1

    def add_raw(self, function: str, raw_arguments: str) -> None:
        call_id = f"r{self.count:04d}"
        args = json.loads(raw_arguments)
        rendered = render(function, args)
        text = (
            '{"call": {"id": '
            + json.dumps(call_id)
            + ', "function": '
            + json.dumps(function, ensure_ascii=False)
            + ', "arguments": '
            + raw_arguments
            + '}, "rendered": '
            + json.dumps(rendered, ensure_ascii=False)
            + "}\n"
        )
        parsed = json.loads(text)
        assert parsed["call"]["arguments"] == args
        self.lines.append(text)
        self.count += 1


def random_value(rng: random.Random, depth: int) -> Any:
    pick = rng.random()
    if depth <= 0 or pick < 0.55:
        kind = rng.randrange(6)
        if kind == 0:
            return rng.choice(STRINGS[:55] + CONTROL_STRINGS[:4])
        if kind == 1:
            return rng.choice(INTS)
        if kind == 2:
            return rng.choice(FLOATS)
        if kind == 3:
            return rng.choice([True, False])
        if kind == 4:
            return None
        return rng.choice(["ok", "x", "é", "a'b", 'a"b', "a\nb", "a\\b"])
    if pick < 0.8:
        return [random_value(rng, depth - 1) for _ in range(rng.randrange(5))]
    keys = ["b", "a", "B", "_", "1", "é", "Z", "key with space", "it's", "", "zz", "aa"]
    rng.shuffle(keys)
    return {k: random_value(rng, depth - 1) for k in keys[: rng.randrange(5)]}


def gen_render() -> list[str]:
    cases = RenderCases()

    # no arguments, odd function names, odd argument names
    cases.add("f", {})
    cases.add("git_status", {})
    cases.add("web_browser_go", {"url": "https://example.com/a?b=1,2&c='3'"})
    cases.add("mcp__srv__tool", {"q": "x"})
    cases.add("Bash", {"command": "ls"})
    cases.add("café", {"crème": "brûlée"})
    cases.add("f", {"": "empty key"})
    cases.add("f", {"key with space": 1, "é": 2, "it's": 3, 'q"k': 4})
    cases.add("f", {"z": 1, "a": 2, "m": 3, "B": 4})
    cases.add("bash", {"cmd": "echo 'hello, world'", "timeout": 30})

    # strings: top level (no escaping), in a list, as dict key and value
    for s in STRINGS + CONTROL_STRINGS + C1_STRINGS:
        cases.add("f", {"s": s})
    for s in STRINGS + CONTROL_STRINGS + C1_STRINGS:
        cases.add("f", {"items": [s]})
    for s in STRINGS:
        cases.add("f", {"d": {s: s}})
    cases.add("f", {"items": ["a", "it's", 'say "hi"', "both ' and \"", "\\", "é"]})

    # numbers, booleans, None: top level and inside containers
    for n in INTS:
        cases.add("f", {"n": n})
    cases.add("f", {"xs": INTS})
    for x in FLOATS:
        cases.add("f", {"x": x})
    for x in FLOATS:
        cases.add("f", {"xs": [x], "d": {"v": x}})
    cases.add("f", {"t": True, "f": False, "n": None})
    cases.add("f", {"xs": [True, False, None], "d": {"t": True, "n": None}})

    # containers: empty, nested, key order, mixed
    cases.add("f", {"xs": [], "d": {}})
    cases.add("f", {"xs": [[]], "ys": [{}], "d": {"e": {}, "l": []}})
    cases.add("f", {"d": {"b": 1, "a": [1, {"d": None, "c": "x"}]}})
    cases.add("f", {"d": {"b": 1, "a": 2, "B": 3, "_": 4, "1": 5, "é": 6, "Z": 7, "": 8}})
    cases.add("f", {"d": {"zz": {"y": {"x": {"w": [1, [2, [3, [4]]]]}}}}})
    cases.add("f", {"d": {"it's": "a'b", 'q"': 'a"b', "both'\"": "both'\""}})
    cases.add("f", {"xs": [1, 1.0, "1", True, None, [1], {"1": 1}]})
    cases.add("computer", {"action": "left_click", "coordinate": [100, 200]})
    cases.add("edit_file", {"path": "/tmp/x", "edits": [{"old": "a", "new": "b"}]})
    cases.add("f", {"items": [1, 2]})
    cases.add("f", {"items": [[1], {"b": 2, "a": None}]})

    # long values
    cases.add("f", {"xs": list(range(120))})
    cases.add("f", {"d": {f"k{i:03d}": i for i in range(60, 0, -1)}})
    cases.add("f", {"xs": ["word " * 50, {"text": "é" * 220}]})
    cases.add("write_file", {"path": "/tmp/big.txt", "content": "0123456789\n" * 40})

    # raw JSON texts
    for raw in RAW_ARGUMENTS:
        cases.add_raw("f", raw)

    # seeded random structures
    rng = random.Random(20240611)
    for _ in range(60):
        keys = ["cmd", "path", "b", "a", "options", "z", "x"]
        rng.shuffle(keys)
        cases.add("tool", {k: random_value(rng, 3) for k in keys[: 1 + rng.randrange(4)]})

    return cases.lines


# ---------------------------------------------------------------------------
# match.jsonl

AUTO_APPROVE = auto_approver("approve")


def inspect_globs(tools: str | list[str]) -> list[str]:
    """The globs Inspect's policy_approver compiled for `tools`."""
    approve = policy_approver([ApprovalPolicy(AUTO_APPROVE, tools)])
    cells = dict(zip(approve.__code__.co_freevars, approve.__closure__ or ()))
    tool_approvers = cells["tool_approvers"].cell_contents
    inner = dict(
        zip(tool_approvers.__code__.co_freevars, tool_approvers.__closure__ or ())
    )
    matchers = inner["policy_matchers"].cell_contents
    assert len(matchers) == 1
    return list(matchers[0][0])


def expand(tools: str | list[str]) -> list[str]:
    """Inspect's expansion of `tools`, written out (checked against inspect_globs)."""
    specs = [tools] if isinstance(tools, str) else tools
    pieces = [t.strip() for spec in specs for t in spec.split(",") if t.strip()]
    return [p if p.endswith("*") else p + "*" for p in pieces]


async def approved_by_policy(tools: str | list[str], call: ToolCall) -> bool:
    init_transcript(Transcript())
    approve = policy_approver([ApprovalPolicy(AUTO_APPROVE, tools)])
    result = await approve("", call, ToolCallView(), [])
    return result.decision == "approve"


def C(function: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    return (function, arguments)


# groups of (tools specs, candidate calls); every spec is tried on every call
MATCH_GROUPS: list[tuple[list[Any], list[tuple[str, dict[str, Any]]]]] = [
    (  # prefix over-match and its fixes
        ["shell", "shell(", "shell(*", "shell*", "shell_exec", "bash", "bash(", "bash_session"],
        [
            C("shell", cmd="ls"),
            C("shell_exec", cmd="whoami"),
            C("Shell", cmd="ls"),
            C("xshell", cmd="ls"),
            C("shell"),
            C("bash", cmd="x"),
            C("bash_session", action="type", input="ls"),
            C("bash2"),
        ],
    ),
    (  # argument globs, argument order, comma splitting
        [
            "computer(action='key'",
            "computer(action='key',",
            "computer(action='key', text='x'",
            "computer(action='key',text='x'",
            "computer(action='key'*text='x'",
            "computer(text='x'",
            "text='x'",
            "computer(*action='key'*",
            "computer(action=?key?",
        ],
        [
            C("computer", action="key", text="x"),
            C("computer", action="key", text="DIFFERENT"),
            C("computer", text="x", action="key"),
            C("computer", action="key_down", text="x"),
            C("computer", action="keys"),
            C("computer", action="key"),
            C("computer", action='"key"'),
            C("computer", action="type", text="x"),
            C("computer"),
        ],
    ),
    (  # comma lists, lists, whitespace, empty pieces
        [
            "a, b,c",
            " a ,\tb ",
            "a,,b",
            " , ",
            "",
            ",",
            [],
            [""],
            ["", " "],
            ["a,b", "c"],
            ["a", "b, c"],
            "\x1ca\x1f",
            "\x1c\x1d\x1e\x1f",
            "\x85b\xa0",
            "\u3000c\u3000",
            "\u2028a\u2029",
            "a\u200b",
            "\ufeffa",
            "\x0ba\x0c",
            "a b",
            "\ta\n",
        ],
        [
            C("a"),
            C("b"),
            C("c"),
            C("a", x=1),
            C("ab"),
            C("d"),
            C("a b"),
            C("a\u200b"),
            C("xa"),
        ],
    ),
    (  # metacharacters and classes
        [
            "*",
            "?",
            "**",
            "bash*",
            "bash?",
            "bash??",
            "bash(cmd='l?'",
            "bash(cmd='l?')",
            "[bc]ash",
            "[!b]ash",
            "[a-c]ash",
            "[z-a]ash",
            "[!z-a]ash",
            "[b-a-c]ash",
            "[^b]ash",
            "[]]x",
            "[!]]x",
            "[[]x",
            "[",
            "bash[",
            "[a-]x",
            "[-a]x",
            "[!-]x",
            "[\\]x",
            "[\\\\]x",
            "[a-\\]x",
            "[a\\-z]x",
            "[[a]x",
            "[a&&b]x",
            "[a||b]x",
            "[a~~b]x",
            "[a--b]x",
            "{a,b}",
            "{x",
            "x}",
            "f(p='C:\\",
            "f(p='C:\\*'",
            "f(p='C:\\\\",
            "f(x=1.5",
            "f(x=1?5",
            "f(x=(",
            "f(x=$",
            "f(x=^",
            "f(x=|",
            "f(x=+",
            "f(items=[1]",
            "f(items=[[]1",
            "f(items=[[]1]",
            "f(items=[[]1[]]",
            "f(items=[[][[]1]]",
        ],
        [
            C("bash", cmd="ls"),
            C("bash", cmd="la"),
            C("bash", cmd="l"),
            C("cash"),
            C("dash"),
            C("^ash"),
            C("-ash"),
            C("Bash"),
            C("bashx"),
            C("bas"),
            C("]x"),
            C("[x"),
            C("!x"),
            C("ax"),
            C("-x"),
            C("\\x"),
            C("&x"),
            C("|x"),
            C("~x"),
            C("{a"),
            C("{x"),
            C("x}"),
            C("f", p="C:\\Users\\me"),
            C("f", p="C:\\*'"),
            C("f", x=1.5),
            C("f", x=105),
            C("f", x="(a)"),
            C("f", x="$HOME"),
            C("f", x="^x"),
            C("f", x="|"),
            C("f", x="+1"),
            C("f", items=[1]),
            C("f", items=[[1]]),
            C("f", items=[1, 2]),
        ],
    ),
    (  # newlines crossed by * and ?, case sensitivity, unicode
        [
            "bash(cmd='echo*rm*",
            "bash(cmd='echo?rm",
            "bash(cmd='echo\nrm",
            "bash(cmd='echo[\n]rm",
            "bash(cmd='*'",
            "bash(cmd='*')",
            "*rm -rf*",
            "*RM -RF*",
            "*\n*",
            "BASH",
            "é",
            "café(",
            "caf?(",
            "caf[é]",
            "caf[!e]",
            "日本",
            "日?",
            "*😀*",
            "*\u200b*",
            "*\xa0*",
            "*\x00*",
            "*'it's'*",
            "*\"*",
        ],
        [
            C("bash", cmd="echo hi\nrm -rf /tmp/x"),
            C("bash", cmd="echo\nrm"),
            C("bash", cmd="echo rm"),
            C("bash", cmd="rm -rf /"),
            C("bash", cmd="RM -RF /"),
            C("bash", cmd="it's"),
            C("bash", cmd='say "hi"'),
            C("bash", cmd="rm\xa0-rf /"),
            C("bash", cmd="zero\u200bwidth"),
            C("bash", cmd="nul\x00"),
            C("é"),
            C("café", crème="brûlée"),
            C("cafe"),
            C("日本語"),
            C("f", s="😀"),
            C("f", xs=["😀", "\u200b", "\xa0"]),
        ],
    ),
    (  # realistic policies against realistic calls
        [
            "web_browser_*",
            "web_browser",
            "web_browser_go(url='https://*.example.com/",
            "web_browser_go(url='http://",
            "[rw]*_file",
            "[rw]*_file(path='/etc/",
            "read_file, write_file",
            ["read_file", "write_file(path='/tmp/"],
            "python, bash",
            "python(code='import os",
            "*password*",
        ],
        [
            C("web_browser_go", url="https://docs.example.com/a?b=1,2"),
            C("web_browser_go", url="http://evil.com"),
            C("web_browser_click", element_id=42),
            C("web_browser_type", element_id=7, text='my password is "x"'),
            C("read_file", path="/etc/passwd"),
            C("write_file", path="/tmp/out.json", content='{"a": [1, 2]}'),
            C("write_file", path="/etc/hosts", content="127.0.0.1 x\n"),
            C("rewrite_file", path="/tmp/y"),
            C("python", code="import os\nprint(os.listdir('.'))"),
            C("python", code="print(1)"),
            C("bash", cmd="ls"),
        ],
    ),
]


def gen_match() -> tuple[list[str], list[str], dict[str, int]]:
    lines: list[str] = []
    invalid: list[str] = []
    stats = {"cases": 0, "true": 0, "fuzz": 0, "fuzz_true": 0, "invalid": 0}

    # hand-written cases, decided by Inspect's real policy_approver
    for specs, calls in MATCH_GROUPS:
        for tools in specs:
            assert inspect_globs(tools) == expand(tools), tools
            for function, arguments in calls:
                args = roundtrip(arguments)
                call = ToolCall(id="m", function=function, arguments=args)
                rendered = render(function, args)
                matches = run(approved_by_policy(tools, call))
                assert matches == any(
                    fnmatch.fnmatch(rendered, g) for g in expand(tools)
                ), (tools, rendered)
                lines.append(line({"tools": tools, "rendered": rendered, "matches": matches}))
                stats["cases"] += 1
                stats["true"] += int(matches)

    # fuzz: patterns heavy in metacharacters, candidates derived from them
    rng = random.Random(5231)
    alphabet = list("*?[]!-^{},\\ab'(=)\n/é") + ["a", "b", "[", "]", "*"]
    spaces = [" ", "\t", "\x1c", "\xa0", "\u3000"]

    def random_text(n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    def random_pattern() -> str:
        text = random_text(rng.randrange(1, 11))
        if rng.random() < 0.1:
            text = rng.choice(spaces) + text
        if rng.random() < 0.1:
            text = text + rng.choice(spaces)
        return text

    def instantiate(glob: str) -> str:
        out: list[str] = []
        i = 0
        while i < len(glob):
            ch = glob[i]
            if ch == "*":
                out.append(random_text(rng.randrange(0, 4)))
            elif ch == "?":
                out.append(rng.choice(alphabet))
            elif ch == "[" and rng.random() < 0.7:
                close = glob.find("]", i + 2)
                if close != -1:
                    body = glob[i + 1 : close].lstrip("!")
                    out.append(rng.choice(body) if body else rng.choice(alphabet))
                    i = close
                else:
                    out.append(ch)
            else:
                out.append(ch)
            i += 1
        text = "".join(out)
        if text and rng.random() < 0.25:
            pos = rng.randrange(len(text))
            text = text[:pos] + rng.choice(alphabet) + text[pos + 1 :]
        return text

    seen: set[str] = set()
    while stats["fuzz"] < 20000:
        if rng.random() < 0.75:
            tools: str | list[str] = random_pattern()
        else:
            tools = [random_pattern() for _ in range(rng.randrange(1, 4))]
        globs = inspect_globs(tools)
        assert globs == expand(tools), tools
        if globs and rng.random() < 0.6:
            candidate = instantiate(rng.choice(globs))
        else:
            candidate = random_text(rng.randrange(0, 13))
        key = json.dumps([tools, candidate], ensure_ascii=False)
        if key in seen:
            continue
        seen.add(key)
        try:
            matches = any(fnmatch.fnmatch(candidate, g) for g in globs)
        except Exception as ex:  # re.error and friends
            invalid.append(line({"tools": tools, "error": f"{type(ex).__name__}: {ex}"}))
            stats["invalid"] += 1
            continue
        lines.append(line({"tools": tools, "candidate": candidate, "matches": matches}))
        stats["fuzz"] += 1
        stats["fuzz_true"] += int(matches)

    return lines, invalid, stats


# ---------------------------------------------------------------------------
# policies/*.yaml and chains.jsonl

POLICIES: dict[str, str] = {
    "basic.yaml": """\
# Prefix globs and a comma list, no catch-all: unmatched tools are rejected.
approvers:
  - name: auto
    tools: "bash(cmd='rm "
    decision: reject
  - name: auto
    tools: shell
    decision: terminate
  - name: auto
    tools: python, bash
    decision: approve
  - name: auto
    tools: read_file
    decision: approve
""",
    "escalate.yaml": """\
# Escalation chains: a catch-all that escalates, then narrower steps.
approvers:
  - name: auto
    tools: "*"
    decision: escalate
  - name: auto
    tools: [bash, python]
    decision: escalate
  - name: auto
    tools: python
    decision: approve
  - name: auto
    tools: computer
    decision: escalate
  - name: auto
    tools: "computer(action='screenshot'"
    decision: approve
""",
    "arguments.yaml": """\
# Argument globs. The comma in the third entry splits it into two globs.
approvers:
  - name: auto
    tools: "*rm -rf*"
    decision: terminate
  - name: auto
    tools: "computer(action='key'"
    decision: reject
  - name: auto
    tools: "computer(action='type', text='secret'"
    decision: reject
  - name: auto
    tools: "web_browser_go(url='https://*.example.com/"
    decision: approve
  - name: auto
    tools: "bash(cmd='echo*rm*"
    decision: reject
  - name: auto
    tools: "[rw]*_file(path='/tmp/"
    decision: approve
  - name: auto
    tools: "f(items=[[]1"
    decision: approve
  - name: auto
    tools: "f(items=[1]"
    decision: reject
  - name: auto
    tools: "*"
    decision: escalate
""",
    "lists.yaml": """\
# Lists, comma lists, empty entries and Python whitespace around pieces.
approvers:
  - name: auto
    tools: []
    decision: terminate
  - name: auto
    tools: ""
    decision: terminate
  - name: auto
    tools: " , ,"
    decision: terminate
  - name: auto
    tools: ["git_status, git_log", " git_diff ", "hg,,svn"]
    decision: approve
  - name: auto
    tools:
      - "\\tdocker_ps\\n"
      - "kubectl(cmd='get"
    decision: approve
  - name: auto
    tools: "\\x1cnpm\\x1f, \\N\\_pip\\u3000, curl\\u200b"
    decision: approve
  - name: auto
    tools: "docker*"
    decision: reject
  - name: auto
    tools: "kubectl?"
    decision: escalate
""",
    "modify.yaml": """\
# `modify` from `auto` carries no modified call, so it becomes a reject.
approvers:
  - name: auto
    tools: "write_file(path='/etc/"
    decision: modify
  - name: auto
    tools: write_file, edit_file
    decision: approve
  - name: auto
    tools: "bash(cmd='sudo "
    decision: escalate
  - name: auto
    tools: "*"
    decision: modify
""",
    "params.yaml": """\
# `params:` and extra keys: an extra key overrides the same key in params.
approvers:
  - name: auto
    tools: bash
    params:
      decision: reject
  - name: auto
    tools: python
    params:
      decision: reject
    decision: approve
  - name: auto
    tools: computer
    params: {}
  - name: auto
    tools: "[!bpc]*"
""",
    "anchors.yaml": """\
# Unknown top-level keys are ignored; YAML anchors and merge keys work.
description: deny network tools, allow the rest
defaults: &deny
  name: auto
  decision: reject
approvers:
  - <<: *deny
    tools: "curl, wget"
  - <<: *deny
    tools: ssh
    decision: terminate
  - name: auto
    tools: "*"
""",
    "review.yaml": """\
# Review chain: no catch-all, so unmatched results continue with no event.
reviewers:
  - name: auto
    tools: "bash(cmd='cat /etc/shadow"
    decision: terminate
  - name: auto
    tools: bash, python
    decision: escalate
  - name: auto
    tools: python
    decision: continue
  - name: auto
    tools: ["web_browser_*", "computer(action='screenshot'"]
    decision: escalate
  - name: auto
    tools: "read_file(path='/var/log/"
""",
    "both.yaml": """\
# One file with both sections: approval reads `approvers:`, review `reviewers:`.
approvers:
  - name: auto
    tools: "bash(cmd='sudo "
    decision: reject
  - name: auto
    tools: "*"
    decision: approve
reviewers:
  - name: auto
    tools: "bash(cmd='sudo "
    decision: terminate
  - name: auto
    tools: "*"
    decision: escalate
  - name: auto
    tools: "python, bash"
    decision: continue
""",
}

CHAIN_CALLS: list[tuple[str, dict[str, Any]]] = [
    C("bash", cmd="ls -la"),
    C("bash", cmd="rm -rf /"),
    C("bash", cmd="rm file.txt"),
    C("bash", cmd="echo hi\nrm -rf /tmp/x"),
    C("bash", cmd="echo 'it'\"'\"'s'"),
    C("bash", cmd="sudo apt-get install -y git, curl"),
    C("bash", cmd="cat /etc/shadow"),
    C("bash", cmd="rm\xa0-rf /"),
    C("bash_session", action="type", input="ls"),
    C("shell", cmd="ls"),
    C("shell_exec", cmd="whoami"),
    C("Bash", command="ls"),
    C("python", code="import os\nprint(os.listdir('.'))"),
    C("python_exec", code="1+1"),
    C("computer", action="key", text="ctrl+c"),
    C("computer", text="ctrl+c", action="key"),
    C("computer", action="screenshot"),
    C("computer", action="type", text="secret, password"),
    C("computer", action="left_click", coordinate=[100, 200]),
    C("web_browser_go", url="https://docs.example.com/a?b=1,2"),
    C("web_browser_go", url="http://evil.com"),
    C("web_browser_click", element_id=42),
    C("web_browser_type", element_id=7, text='hello "world"'),
    C("read_file", path="/tmp/notes.txt"),
    C("read_file", path="/var/log/syslog"),
    C("write_file", path="/etc/passwd", content="root::0:0\n"),
    C("write_file", path="/tmp/out.json", content='{"a": [1, 2]}'),
    C("edit_file", path="/tmp/x", edits=[{"old": "a", "new": "b"}]),
    C("git_status"),
    C("git_diff", paths=["a.py", "b.py"]),
    C("hg", cmd="log"),
    C("svn", cmd="up"),
    C("docker_ps", all=True),
    C("kubectl", cmd="get pods, svc"),
    C("kubectl_apply", file="x.yaml"),
    C("npm", cmd="install"),
    C("pip", cmd="install -r requirements.txt"),
    C("curl", url="https://x.org"),
    C("curl\u200b", url="https://x.org"),
    C("wget", url="ftp://y"),
    C("ssh", host="h", port=22),
    C("f", items=[1, 2]),
    C("f", items=[[1], {"b": 2, "a": None}]),
    C("café", crème="brûlée"),
    C("unknown_tool", x=1.5, y=None),
]

HISTORY_USER = ChatMessageUser(content="Please do the task.")


def event_trail(transcript: Transcript) -> list[dict[str, Any]]:
    trail: list[dict[str, Any]] = []
    for event in transcript.events:
        if isinstance(event, ApprovalEvent):
            trail.append(
                {"approver": event.approver, "decision": event.decision, "explanation": event.explanation}
            )
        elif isinstance(event, ReviewEvent):
            trail.append(
                {"approver": event.reviewer, "decision": event.decision, "explanation": event.explanation}
            )
    return trail


class StepTracer:
    """Notes which policy entries were asked, by wrapping Inspect's call_approver /
    call_reviewer where policy_approver / policy_reviewer look them up."""

    def __init__(self) -> None:
        self.index: dict[int, int] = {}
        self.asked: list[int] = []
        real_call_approver = approval_policy_module.call_approver
        real_call_reviewer = review_policy_module.call_reviewer

        async def traced_call_approver(approver, *args):  # type: ignore[no-untyped-def]
            self.asked.append(self.index[id(approver)])
            return await real_call_approver(approver, *args)

        async def traced_call_reviewer(reviewer_, *args):  # type: ignore[no-untyped-def]
            self.asked.append(self.index[id(reviewer_)])
            return await real_call_reviewer(reviewer_, *args)

        approval_policy_module.call_approver = traced_call_approver  # type: ignore[assignment]
        review_policy_module.call_reviewer = traced_call_reviewer  # type: ignore[assignment]

    def use(self, steps: list[Any]) -> None:
        self.index = {id(step): i for i, step in enumerate(steps)}


async def approval_outcome(
    tracer: StepTracer, path: Path, call: ToolCall
) -> dict[str, Any]:
    policies = approval_policies_from_config(str(path))
    tracer.use([p.approver for p in policies])
    tracer.asked = []
    transcript = Transcript()
    init_transcript(transcript)
    assistant = ChatMessageAssistant(content="Running the tool.", tool_calls=[call])
    with approval(policies):
        _, result = await apply_tool_approval(
            assistant.text, call, None, [HISTORY_USER, assistant]
        )
    assert result is not None
    trail = event_trail(transcript)
    return {
        "decision": result.decision,
        "explanation": result.explanation,
        "approver": trail[-1]["approver"] if trail else None,
        "trail": trail,
        "steps": list(tracer.asked),
    }


async def review_outcome(tracer: StepTracer, path: Path, call: ToolCall) -> dict[str, Any]:
    policies = review_policies_from_config(str(path))
    tracer.use([p.reviewer for p in policies])
    tracer.asked = []
    transcript = Transcript()
    init_transcript(transcript)
    assistant = ChatMessageAssistant(content="Running the tool.", tool_calls=[call])
    output = "tool output"
    result_message = ChatMessageTool(
        content=output, tool_call_id=call.id, function=call.function
    )
    with review(policies):
        result = await apply_tool_review(
            assistant.text, call, result_message, output, None, [HISTORY_USER, assistant]
        )
    assert result is not None
    trail = event_trail(transcript)
    return {
        "decision": result.decision,
        "explanation": result.explanation,
        "approver": trail[-1]["approver"] if trail else None,
        "trail": trail,
        "steps": list(tracer.asked),
    }


def gen_chains() -> tuple[list[str], dict[str, int]]:
    POLICY_DIR.mkdir(exist_ok=True)
    for stale in POLICY_DIR.glob("*.yaml"):
        if stale.name not in POLICIES:
            stale.unlink()
    for name, text in POLICIES.items():
        (POLICY_DIR / name).write_text(text, encoding="utf-8", newline="\n")

    tracer = StepTracer()
    lines: list[str] = []
    stats: dict[str, int] = {}
    counter = 0
    for name, text in POLICIES.items():
        path = POLICY_DIR / name
        kinds = [
            kind
            for kind, key in (("approval", "approvers:"), ("review", "reviewers:"))
            if any(row.startswith(key) for row in text.splitlines())
        ]
        for kind in kinds:
            for function, arguments in CHAIN_CALLS:
                call_id = f"call_{counter:04d}"
                counter += 1
                args = roundtrip(arguments)
                call = ToolCall(id=call_id, function=function, arguments=args)
                if kind == "approval":
                    outcome = run(approval_outcome(tracer, path, call))
                else:
                    outcome = run(review_outcome(tracer, path, call))
                lines.append(
                    line(
                        {
                            "policy": f"policies/{name}",
                            "kind": kind,
                            "call": {"id": call_id, "function": function, "arguments": args},
                            **outcome,
                        }
                    )
                )
                key = f"{kind}:{outcome['decision']}"
                stats[key] = stats.get(key, 0) + 1
    return lines, stats


# ---------------------------------------------------------------------------


def main() -> None:
    if inspect_ai.__version__ != INSPECT_VERSION:
        sys.exit(
            f"inspect-ai {INSPECT_VERSION} is required (found {inspect_ai.__version__})"
        )
    if sys.version_info[:2] != (3, 11):
        print(
            f"note: vectors were generated with CPython 3.11; running "
            f"{sys.version.split()[0]} (Unicode {unicodedata.unidata_version})",
            file=sys.stderr,
        )

    render_lines = gen_render()
    write_lines(OUT / "render.jsonl", render_lines)

    match_lines, invalid_lines, match_stats = gen_match()
    write_lines(OUT / "match.jsonl", match_lines)
    invalid_path = OUT / "invalid_globs.jsonl"
    if invalid_lines:
        write_lines(invalid_path, invalid_lines)
    elif invalid_path.exists():
        invalid_path.unlink()

    chain_lines, chain_stats = gen_chains()
    write_lines(OUT / "chains.jsonl", chain_lines)

    print(f"render.jsonl: {len(render_lines)} calls")
    print(
        f"match.jsonl: {match_stats['cases']} policy cases "
        f"({match_stats['true']} match), {match_stats['fuzz']} fuzz cases "
        f"({match_stats['fuzz_true']} match); invalid globs: {match_stats['invalid']}"
    )
    print(
        f"chains.jsonl: {len(chain_lines)} outcomes over {len(POLICIES)} policies "
        + json.dumps(dict(sorted(chain_stats.items())))
    )


if __name__ == "__main__":
    main()
