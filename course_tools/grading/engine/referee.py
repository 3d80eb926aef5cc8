"""The referee: an audit hook that keeps a grade cell's judge out of reach of the learner code it calls.

Why. The verdict worker (``apart_worker.py``) runs a grade cell in a child process where the learner's functions
run too: a check must call them, and many checks must watch them from inside (a spy on ``synchronize``, a
sync counter, a simulated GPU). Python lets any code reach nearly anything in its process, so tampering
answers written from the shipped code reached the judge: they swapped a check's ``__code__``, read the
expected value out of the check's frame (``sys._getframe``), emptied the guard's snapshot through ``gc``,
stashed the course's own implementation where the tripwire did not look, or rewrote the child's report.

The one place in a Python process that Python code cannot reach is an audit hook (PEP 578,
``sys.addaudithook``): hooks cannot be listed, removed or replaced, and CPython raises an audit event
for each of those doors. :func:`arm` installs one in the child before the learner's definitions are loaded.
It keeps its state in its closure and:

* **refuses** (raises :class:`Refused` and records it) what only tampering needs, when learner code asks:
  function surgery (``__code__``, ``__defaults__``, ``__kwdefaults__``), a frame (``sys._getframe``,
  ``tb_frame``, ``gi_frame``, ``inspect.stack()`` ...), ``gc``'s object lists, other threads' frames,
  ``ctypes``, tracing, another audit hook, and code or functions made under a file name of the grader's
  (so learner code cannot pass for torch's or the course's own);
* **refuses the course's own implementation of an exercise** while that exercise runs: each course
  version announces itself (``sys.audit("course.version", spec)``, first line of its body), and the
  referee refuses it when the learner's code is the caller, however the learner got hold of it
  (a default argument, a closure, ``__wrapped__``);
* **keeps a copy of what the checks record** (:class:`helpers.record.Record`: a simulated GPU's log, the
  host syncs counted): entries come only from the course's code, so a record the learner's code cleared or
  rewrote no longer matches its copy;
* **sends the report**: only the judge's own code (:data:`Referee.judge_code`) may send it, once, signed
  with a key the worker made for this cell, over a pipe the worker reads; a message the learner's code
  writes there fails the signature and marks the cell tampered.

Learner code is recognised by its file name (anything outside the standard library, the installed
packages, the course's helpers and the grader's own pseudo-files) and by identity: every code object made
while the learner's definitions load is the learner's, whatever file name it claims.

What it cannot see: code that reaches nothing of the above (its own objects, the arguments it is given,
what importable modules hold). The checks handle those (``helpers.checks.core.solved``: answers are plain
data; ``verdict.Guard``: what the grader's functions are, compared after the cell).

This file runs as part of the worker's program (``verdict.VerdictWorker.launch``), so it imports only the
standard library.
"""

from __future__ import annotations

import os
import sys

#: The grader's pseudo-file names: the worker's program and the grade cell (``apart_worker.py``).
WORKER_FILE = "<course-verdict-worker>"
GRADE_CELL_FILE = "<grade cell>"
#: Attributes that hand out a frame, from which ``f_back`` and ``f_locals`` reach every caller.
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
#: What changes a function's behaviour in place; no honest answer needs it.
FUNCTION_SURGERY = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
#: Events that expose every object or every thread's frames: refused while learner code is on the stack.
EXPOSING = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
                      "sys.settrace", "sys.setprofile", "threading.settrace", "threading.setprofile"})
#: Standard-library files whose functions hand frames on to their caller: a frame they ask for is asked for
#: by whoever called them.
_FORWARDING = ("inspect.py", "traceback.py", "bdb.py", "pdb.py")  # and asyncio's files
REPORT_EVENT = "course.report"
VERSION_EVENT = "course.version"
EXERCISE_EVENT = "course.exercise"
ALLOW_EVENT = "course.allow"
RECORD_EVENT = "course.record"
RECORDS_EVENT = "course.records"

REFUSALS = {
    "surgery": "changed a function's {name} in place",
    "frame": "read the stack of the code that called it ({name})",
    "exposing": "looked through every object or thread ({name})",
    "ctypes": "reached the process's memory through ctypes ({name})",
    "hook": "installed an audit hook",
    "disguise": "made code or a function under a file name of the grader's ({name})",
    "report": "tried to send the check's report itself",
    "record": "wrote into or read the check's record of what it did ({name})",
}


class Refused(PermissionError):
    """What the referee raises where learner code asked for something only tampering needs."""


def trusted_roots(helpers_root: str | None = None) -> tuple[str, ...]:
    """Folders whose code is not the learner's: the standard library, installed packages, the course's helpers."""
    import sysconfig

    paths = sysconfig.get_paths()
    roots = {paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {os.path.dirname(os.__file__)}
    roots |= set(p for p in sys.path if p and "site-packages" in p)
    if helpers_root:
        roots.add(os.path.join(helpers_root, "helpers"))
    return tuple(sorted(os.path.abspath(r) + os.sep for r in roots if r))


def arm(*, key: bytes, fd: int, helpers_root: str | None, judge_code, versions: dict[str, frozenset],
        version_error=None):
    """Install the referee in this process (the verdict child), before the learner's definitions load.

    ``key``/``fd``: where the one report goes, signed. ``judge_code``: the code object allowed to send it.
    ``versions``: course-version spec -> the exercises it belongs to (a frozen copy of
    ``helpers.checks.delegation.COURSE_VERSIONS``; specs of ``helpers.checks`` modules belong to every
    exercise). ``version_error(spec)``: the exception to raise for a refused course version.

    Returns ``loaded(objects)``, for the judge to call once the definitions are in: every code object they hold
    is then the learner's, whatever file name it claims, and making code under the grader's names is refused
    only while learner code runs from then on.
    """
    import hashlib
    import hmac
    import threading

    roots = trusted_roots(helpers_root)
    pseudo = (WORKER_FILE, GRADE_CELL_FILE)
    optim_dir = None
    made_by_learner: dict[int, object] = {}  # id -> code object (kept alive, so the id is not reused)
    exercises: list[tuple[str, object]] = []  # (exercise, token) of the solved() calls running now
    refusals: list[str] = []
    lifted: list[tuple[str, object]] = []  # course versions a check allows for a while (chapter 01's crossover)
    made_while_loading: list[tuple[str, str]] = []  # (file, name) of code rebuilt under a grader's file name
    records: dict[int, tuple] = {}  # id(key) -> (key, entries): helpers.record.Record's copies
    sent = [False]
    loading = [True]
    busy: set[int] = set()
    get_ident = threading.get_ident
    getframe = sys._getframe
    write = os.write
    digest = hmac.new
    sha256 = hashlib.sha256

    try:
        import torch.optim as _optim  # noqa: PLC0415 - a file name the sync counter reads as torch's bookkeeping

        optim_dir = os.path.dirname(os.path.abspath(_optim.__file__)) + os.sep
    except Exception:  # noqa: BLE001 - no torch: nothing of it to pass for
        pass

    def grader_file(filename: object) -> bool:
        if not isinstance(filename, str):
            return False
        if filename in pseudo:
            return True
        path = os.path.abspath(filename) if filename and not filename.startswith("<") else filename
        return bool(helpers_root) and path.startswith(os.path.join(os.path.abspath(helpers_root), "helpers") + os.sep) \
            or bool(optim_dir) and path.startswith(optim_dir)

    def learner_name(name: str) -> bool:
        """A file name outside the grader's: not the standard library, installed packages, helpers, pseudo-files."""
        if name in pseudo or name.startswith("<frozen "):
            return False
        return name.startswith("<") or not os.path.abspath(name).startswith(roots)

    def learners(code) -> bool:
        return id(code) in made_by_learner or learner_name(code.co_filename)

    def learner_on_stack(frame) -> bool:
        while frame is not None and frame.f_code is not judge_code:  # below the judge: the worker's own frames
            if learners(frame.f_code):
                return True
            frame = frame.f_back
        return False

    def forwarding(frame) -> bool:
        name = frame.f_code.co_filename
        if name.endswith(_FORWARDING) or os.sep + "asyncio" + os.sep in name:
            return True
        return name.endswith(os.sep + "logging" + os.sep + "__init__.py") and frame.f_code.co_name == "<lambda>"

    def asked_by_learner(frame) -> bool:
        """The frame that asked, or the first caller past the standard library's frame-forwarding functions."""
        while frame is not None and not learners(frame.f_code) and forwarding(frame):
            frame = frame.f_back
        return frame is not None and frame.f_code is not judge_code and learners(frame.f_code)

    def caller_past_libraries(frame):
        """The first frame above ``frame`` that is the learner's or the course's (skipping torch and Python)."""
        while frame is not None and frame.f_code is not judge_code:
            if learners(frame.f_code) or grader_file(frame.f_code.co_filename):
                return frame
            frame = frame.f_back
        return None

    def from_course() -> bool:
        """Whether the event was raised by the course's code (helpers) on behalf of code that is not the
        learner's: the frame that raised it (3 up from here: this function, judge, hook) is a course file, and
        the frame that called that one is not the learner's."""
        raiser, asker = getframe(3), getframe(4)
        return grader_file(raiser.f_code.co_filename) and asker is not None and not learners(asker.f_code)

    def track(stack: list, action: str, value: object, token: object) -> None:
        """Push ``(value, token)`` on "enter"/"push"; on anything else pop the top, if it is this token's."""
        if action in ("enter", "push"):
            stack.append((value, token))
        elif stack and stack[-1][1] is token:
            stack.pop()

    def refuse(kind: str, name: str = "") -> None:
        what = REFUSALS[kind].format(name=name)
        refusals.append(what)
        raise Refused(f"the grader refuses this while a check runs: your code {what}. A check judges what your "
                      "functions return and do; leave the grader, its frames and its functions alone")

    def judge(event: str, args: tuple) -> None:
        if event == "object.__setattr__":
            if args[1] in FUNCTION_SURGERY and asked_by_learner(getframe(2)):
                refuse("surgery", args[1])
        elif event == "object.__getattr__":
            if args[1] in FRAME_ATTRIBUTES:
                frame = getframe(2)
                if frame.f_code.co_filename.endswith("traceback.py") and not learners(frame.f_code):
                    back = frame.f_back  # walk_tb/walk_stack hand frames on; the rest of traceback formats them
                    if frame.f_code.co_name.startswith("walk_") and back is not None and learners(back.f_code):
                        refuse("frame", args[1])
                elif asked_by_learner(frame):
                    refuse("frame", args[1])
        elif event == "sys._getframe":
            if asked_by_learner(getframe(2)):
                refuse("frame", "sys._getframe")
        elif event in EXPOSING:
            frame = getframe(2)
            if asked_by_learner(frame) or (event.startswith(("sys.set", "threading.set")) and learner_on_stack(frame)):
                refuse("exposing", event)
        elif event.startswith("ctypes.") and event != "ctypes.dlopen":
            if learner_on_stack(getframe(2)):
                refuse("ctypes", event)
        elif event == "sys.addaudithook":
            refuse("hook")
        elif event in ("compile", "code.__new__", "function.__new__"):
            filename = args[1] if event != "function.__new__" else getattr(args[0], "co_filename", None)
            if not isinstance(filename, str) or learner_name(filename):
                return
            if loading[0]:  # cloudpickle rebuilds code (a torch decorator's closure, by value); it never compiles
                if event == "compile":
                    refuse("disguise", filename)
                if event == "code.__new__":
                    made_while_loading.append((filename, args[2]))
            elif asked_by_learner(getframe(2)):
                refuse("disguise", filename)
        elif event == EXERCISE_EVENT:
            frame = getframe(2)
            if grader_file(frame.f_code.co_filename) and not learners(frame.f_code):
                track(exercises, *args)
        elif event == ALLOW_EVENT:
            if not from_course():
                refuse("record", event)
            track(lifted, *args)
        elif event == VERSION_EVENT:
            spec = args[0]
            owners = versions.get(spec) or (frozenset({"*"}) if spec.startswith("helpers.checks.") else frozenset())
            active = {name for name, _token in exercises}
            if active and ("*" in owners or owners & active) and spec not in {s for s, _t in lifted}:
                caller = caller_past_libraries(getframe(3))
                if caller is not None and learners(caller.f_code):
                    refusals.append(f"called the course's own version `{spec}`")
                    raise (version_error(spec) if version_error else Refused(spec))
        elif event in (RECORD_EVENT, RECORDS_EVENT):
            if not from_course():  # raised by helpers.record.Record, for the course's code
                refuse("record", event)
            if event == RECORD_EVENT:
                records.setdefault(id(args[0]), (args[0], []))[1].append(args[1])
            else:
                args[1].append(list(records.get(id(args[0]), (None, []))[1]))
        elif event == REPORT_EVENT:
            frame = getframe(2)
            if frame.f_code is not judge_code or learner_on_stack(frame) or sent[0]:
                refuse("report")
            sent[0] = True
            result = dict(args[0])
            result["tampered"] = [str(x) for x in result.get("tampered", [])] + [str(r) for r in refusals]
            payload = repr(_plain(result)).encode("utf-8", "replace")
            mac = digest(key, payload, sha256).digest()
            data = len(payload).to_bytes(8, "big") + mac + payload
            while data:
                data = data[write(fd, data):]

    def hook(event: str, args: tuple) -> None:
        me = get_ident()
        if me in busy:
            return
        busy.add(me)
        try:
            judge(event, args)
        finally:
            busy.discard(me)

    def loaded(objects: object) -> None:
        """The learner's definitions are in: every code object they hold is the learner's, whatever its name, and
        a function among them that claims a file of the standard library, torch or the course is relabelled
        ``<learner: file>``, so that code reading file names (the sync counter's "torch's own bookkeeping") is
        not fooled either."""
        brought = {(code.co_filename, code.co_name) for code in _codes(objects)}
        for function in _functions(objects):
            code = function.__code__
            if not learners(code):
                function.__code__ = _relabelled(code)
        for code in _codes(objects):
            made_by_learner[id(code)] = code
        loading[0] = False
        stashed = sorted({f"{name} ({file})" for file, name in made_while_loading if (file, name) not in brought})
        if stashed:  # made under a grader's file name while loading, and kept somewhere else than the definitions
            refusals.append(REFUSALS["disguise"].format(name=", ".join(stashed[:3])))

    sys.addaudithook(hook)
    return loaded




def _relabelled(code):
    """``code`` and the code nested in it under the file name ``<learner: its file>``."""
    import types

    consts = tuple(_relabelled(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    name = code.co_filename if code.co_filename.startswith("<learner: ") else f"<learner: {code.co_filename}>"
    return code.replace(co_filename=name, co_consts=consts)


def _functions(root: object) -> list:
    """The functions among the objects :func:`_codes` walks (defaults, closures, classes, containers)."""
    import types

    return [obj for obj in _walk(root) if isinstance(obj, types.FunctionType)]


def _codes(root: object) -> list:
    """Every code object reachable from ``root`` through functions, classes, containers and nested code."""
    import types

    return [obj for obj in _walk(root) if isinstance(obj, types.CodeType)]


def _walk(root: object, limit: int = 100_000) -> list:
    """What ``root`` reaches through functions (code, defaults, closures), methods, classes defined in the
    notebook, containers and nested code: the learner's definitions as loaded, not the modules they name."""
    import types

    found, seen, todo = [], set(), [root]
    while todo and len(seen) < limit:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        found.append(obj)
        if isinstance(obj, types.CodeType):
            todo.extend(c for c in obj.co_consts if isinstance(c, types.CodeType))
        elif isinstance(obj, types.FunctionType):
            todo.append(obj.__code__)
            todo.extend(obj.__defaults__ or ())
            todo.extend((obj.__kwdefaults__ or {}).values())
            for cell in obj.__closure__ or ():
                try:
                    todo.append(cell.cell_contents)
                except ValueError:
                    pass
        elif isinstance(obj, types.MethodType):
            todo.append(obj.__func__)
        elif isinstance(obj, (staticmethod, classmethod)):
            todo.append(obj.__func__)
        elif isinstance(obj, property):
            todo.extend(f for f in (obj.fget, obj.fset, obj.fdel) if f is not None)
        elif isinstance(obj, type):
            if obj.__module__ in ("__main__", "__mp_main__") or obj.__module__.startswith("_cloudpickle"):
                todo.extend(vars(obj).values())
        elif isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            todo.extend(obj)
    return found


def _plain(value: object, depth: int = 0) -> object:
    """``value`` as exact built-in types (what ``repr`` then ``ast.literal_eval`` carry across unchanged)."""
    if depth > 20:
        return None
    if value is None or type(value) in (bool, int, float):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, dict):
        return {str.__str__(str(k)): _plain(v, depth + 1) for k, v in dict.items(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in list.__iter__(list(value))]
    return str.__str__(object.__repr__(value))


def read_reports(data: bytes, key: bytes) -> tuple[dict | None, bool]:
    """(the report the judge sent, whether anything else was written to its pipe) from the pipe's bytes."""
    import ast
    import hashlib
    import hmac

    report, forged = None, False
    while data:
        if len(data) < 40:
            return report, True
        size = int.from_bytes(data[:8], "big")
        mac, payload, data = data[8:40], data[40:40 + size], data[40 + size:]
        if len(payload) < size or not hmac.compare_digest(mac, hmac.new(key, payload, hashlib.sha256).digest()):
            return report, True
        if report is None:
            try:
                report = ast.literal_eval(payload.decode("utf-8"))
            except (ValueError, SyntaxError):
                return None, True
        else:
            forged = True
    return report, forged
