"""Hidden checks try more *inputs* of the rules a learner was shown, never a rule the learner was not shown.

A learner who sees every visible check of a grade cell pass must not lose that cell's points to a case of a
kind they never saw. The pairing is mechanical, so a new hidden case cannot drift from it: each hidden call
of a check must be made of the same *kinds* of input as the visible calls of that check in the same cell.

The kinds of a call (its "vocabulary", :func:`vocabulary`) are
- its keyword names, unless the value is a plain number or a name that stands only for numbers
  (``counts=[8, 4, 2, 0]``: unordered counts are a kind; ``seed=3``, ``margin=0.25`` are other inputs);
- the devices, fake machines and failures its arguments are built from (``torch.device``, ``FakeMachine``,
  ``OSError``), with their keyword names (``FakeMachine(mps=True)`` is ``FakeMachine.mps``); a model, a
  tensor or a helper that builds inputs is another input;
- the floating dtypes it names (``torch.float16``);
- its short one-word string constants with digits made ``N`` (``"cuda:1"`` is ``"cuda:N"``, a kind
  ``"cuda"`` is not; a label such as ``"count_parameters of a frozen model"``, a dict's keys and values and
  a constant handed to a helper that builds inputs, such as ``nn.Linear(8, 4, bias=False)``, are inputs);
- ``True``, ``False`` and ``None`` (an expected ``True`` is a different rule from an expected ``False``).
A loop variable stands for what its loop runs over.
Numbers are inputs, not kinds. A name bound earlier in the cell stands for what it was bound to.

Every kind in a hidden call must appear in some visible call of the same check in the same cell.
"""

import ast
import re

import pytest

from support.layout import chapters, load, nbgrader_meta, solution_path

KIND_CALLABLES = {"torch.device", "FakeMachine"}
DTYPES = {f"torch.{name}" for name in ("float16", "bfloat16", "float32", "float64", "half", "float", "double")}
WORD = re.compile(r"[\w:.-]{1,24}")  # a device, a backend, a start method; not a label or a message
HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS\n?", re.S)


def split(source: str) -> tuple[str, str]:
    """(visible, hidden) source of a grade cell; the hidden part is every hidden block, in order."""
    hidden = "".join(HIDDEN_BLOCK.findall(source))
    return HIDDEN_BLOCK.sub("", source), hidden


def dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def check_name(call: ast.Call) -> str | None:
    """`ch04.check_pick(...)` -> "check_pick"; only the course's checks count (not `passed`, `torch.device`)."""
    name = dotted(call.func)
    if name is None:
        return None
    last = name.rsplit(".", 1)[-1]
    return last if last.startswith("check") else None


def is_kind_callable(name: str) -> bool:
    """Callables whose use makes a different case: a device, a fake machine, a failure. A model, a tensor or
    a helper that builds inputs makes another input of the same case."""
    last = name.rsplit(".", 1)[-1]
    return name in KIND_CALLABLES or last.endswith(("Error", "Exception", "Interrupt", "Warning"))


def kinds(node: ast.AST, bindings: dict[str, set[str]]) -> set[str]:
    """The kinds of input an expression is built from (see the module docstring)."""
    found: set[str] = set()
    data = {id(c) for sub in ast.walk(node) if isinstance(sub, ast.Dict) for c in [*sub.keys, *sub.values] if c}
    data |= {id(c) for sub in ast.walk(node) if isinstance(sub, ast.Call) and not is_kind_callable(dotted(sub.func) or "")
             for arg in [*sub.args, *(kw.value for kw in sub.keywords)] for c in ast.walk(arg)
             if isinstance(c, ast.Constant)}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            callee = dotted(sub.func)
            if callee and is_kind_callable(callee):
                found.add(f"{callee}()")
                found.update(f"{callee}.{kw.arg}" for kw in sub.keywords if kw.arg)
        elif isinstance(sub, ast.Attribute) and dotted(sub) in DTYPES:
            found.add(dotted(sub))
        elif isinstance(sub, ast.Constant) and id(sub) not in data:
            if isinstance(sub.value, str) and WORD.fullmatch(sub.value):
                found.add(repr(re.sub(r"\d+", "N", sub.value)))
            elif sub.value is None or isinstance(sub.value, bool):
                found.add(repr(sub.value))
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in bindings:
            found |= bindings[sub.id]
    return found


def is_number(node: ast.AST) -> bool:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return isinstance(node, ast.BinOp) and is_number(node.left) and is_number(node.right)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def vocabulary(call: ast.Call, bindings: dict[str, set[str]]) -> set[str]:
    """A check call's kinds: its keyword names (unless the value is a plain number, which is an input) plus
    the kinds of every argument (the check itself is not one)."""
    found = {f"{kw.arg}=" for kw in call.keywords if kw.arg and not is_number(kw.value)
             and not (isinstance(kw.value, ast.Name) and bindings.get(kw.value.id) == set())}
    for arg in [*call.args, *(kw.value for kw in call.keywords)]:
        found |= kinds(arg, bindings)
    return found


def check_calls(source: str, bindings: dict[str, set[str]]) -> list[tuple[str, set[str], int]]:
    """(check, vocabulary, line) of every check call in ``source``, reading assignments as they come."""
    calls = []
    for stmt in ast.parse(source).body:
        if isinstance(stmt, ast.For):  # a loop variable stands for what the loop runs over
            for target in ast.walk(stmt.target):
                if isinstance(target, ast.Name):
                    bindings[target.id] = kinds(stmt.iter, bindings)
        if isinstance(stmt, ast.Assign):
            value = kinds(stmt.value, bindings)
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    bindings[target.id] = value
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and (name := check_name(node)):
                calls.append((name, vocabulary(node, bindings), node.lineno))
    return calls


def unshown(source: str) -> list[str]:
    """What hidden calls of a grade cell try that no visible call of the same check shows."""
    visible, hidden = split(source)
    if not hidden.strip():
        return []
    bindings: dict[str, set[str]] = {}
    shown: dict[str, set[str]] = {}
    for name, vocab, _ in check_calls(visible, bindings):
        shown.setdefault(name, set()).update(vocab)
    problems = []
    hidden_lines = hidden.splitlines()
    for name, vocab, line in check_calls(hidden, bindings):
        missing = vocab - shown.get(name, set())
        if name not in shown:
            problems.append(f"{name} is called only in hidden tests: {hidden_lines[line - 1].strip()}")
        elif missing:
            problems.append(f"{name}: hidden case tries {sorted(missing)} that no visible call shows: "
                            f"{hidden_lines[line - 1].strip()}")
    return problems


GRADE_CELLS = [(chapter, cell) for chapter in chapters() for cell in load(solution_path(chapter)).cells
               if cell.cell_type == "code" and nbgrader_meta(cell).get("grade")]


@pytest.mark.parametrize("chapter, cell", GRADE_CELLS, ids=[nbgrader_meta(c)["grade_id"] for _, c in GRADE_CELLS])
def test_hidden_cases_try_only_kinds_the_visible_checks_show(chapter, cell):
    problems = unshown(cell.source)
    assert not problems, (f"{chapter}/{nbgrader_meta(cell)['grade_id']}: a learner whose visible checks pass "
                          "could lose points to a case they were never shown; add a visible call of each kind:\n"
                          + "\n".join(problems))


CELL = '''"""Check that f pins."""
from helpers.checks import ch04
died = RuntimeError("x")
ch04.check_pick(f, {0: [1], 2: died})
ch04.check_pinning(f, FakeMachine(cuda=1), "cuda", expected=True)
### BEGIN HIDDEN TESTS
{hidden}
### END HIDDEN TESTS
passed()
'''


@pytest.mark.parametrize("hidden, found", [
    ('ch04.check_pick(f, {0: [5], 3: died, 4: [2]})', []),                                   # more inputs
    ('ch04.check_pinning(f, FakeMachine(cuda=2), "cuda", expected=True)', []),               # another number
    ('ch04.check_pick(f, {0: [1], 1: OSError(24, "Too many")})', ["OSError()"]),
    ('ch04.check_pick(f, {0: [1]}, counts=[0])', ["counts="]),                                # unordered counts
    ('ch04.check_pinning(f, FakeMachine(cuda=1), "cuda:1", expected=True)', ["'cuda:N'"]),
    ('ch04.check_pinning(f, FakeMachine(mps=True), "mps", expected=False)',
     ["'mps'", "FakeMachine.mps", "False"]),
    ('import torch\nch04.check_pinning(f, FakeMachine(cuda=1), torch.device("cuda"), expected=True)',
     ["torch.device()"]),
    ('ch04.check_order(f, n=3)', None),                                                      # a check never shown
])
def test_the_pairing_rule_can_fail(hidden, found):
    problems = unshown(CELL.replace("{hidden}", hidden))
    if found is None:
        assert problems and "only in hidden tests" in problems[0]
    elif not found:
        assert problems == []
    else:
        assert len(problems) == 1 and all(kind in problems[0] for kind in found), problems
