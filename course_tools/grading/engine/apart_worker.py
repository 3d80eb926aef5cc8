"""A grade cell's verdict, decided in a process the learner's code never ran in.

Why. A grade cell's checks used to run in the learner's kernel, after the learner's own cells. Python lets
any code change anything else in its process, so ten lines in a solution cell (replace every ``check_*`` of
``helpers.checks`` with a no-op, put a stand-in into ``sys.modules``, patch ``torch.allclose``) turned a
chapter's blank exercises into full marks. PrairieLearn's grader maintainers say it plainly: same-process
Python "is almost impossible to protect against"; their secured grader runs student code apart and lets
only data cross to the trusted side.

How, when an instructor grades (``LimitedExecute`` in ``execute.py`` calls this for every grade cell):

1. The learner's cells run in the sandboxed kernel, as before. At a grade cell the kernel is asked only
   for the definitions the cell reads and does not assign (``choose_device``, a class, a constant),
   serialized by value with cloudpickle (:data:`EXPORT`). Whatever the kernel's cells changed in their own
   process (check modules, torch, builtins, ``sys.modules``, IPython's traceback display) stays there.
2. A :class:`VerdictWorker`, started by the grader and not by the kernel, is a fresh Python in a sandbox of
   its own. It imports torch and every check module once (:func:`prepare`) and never runs learner code
   itself: for each grade cell it forks a child, which loads the definitions, runs the cell's source (its
   hidden tests included: they never reach the kernel) and writes its output and outcome as data. The
   grader turns that into the cell's outputs, so nbgrader scores the cell exactly as before.
3. The learner's functions do run in that child: the checks call them. What they change of the grader's
   surface (the check modules, the torch and standard-library functions checks use, ``sys.modules``) is
   found by :class:`Guard`, a snapshot taken before the definitions are loaded and compared after the cell;
   the cell then fails, saying what was replaced. A stand-in a check installs (a spy on ``synchronize``)
   and finds replaced fails the check (``helpers.checks.patching``). A child that ends before it reports
   (``os._exit``, a signal) scores 0.

What stays possible: code inside a learner's function that knows this module could forge its child's
report. That is the limit PrairieLearn names for any check that must watch the learner's code from inside
its process (spies on the clock, on ``synchronize``); this module is the instructor's (``course_tools``,
not in the student edition). Learners working alone keep their checks in their own kernel: instant, and
nothing to protect there.

This file runs in two places: imported by the grader, and as the worker's whole program
(``python -I -c <this file's source> course-verdict-worker``), inside the sandbox, which shows neither the
course folder nor ``course_tools``. So it imports only the standard library at the top.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import struct
import sys
import tempfile
import traceback
import types

try:  # in the worker's program the boot ran referee.py's source first, into this same namespace
    arm, read_reports, GRADE_CELL_FILE, REPORT_EVENT, WORKER_FILE  # noqa: B018
except NameError:  # imported by the grader
    from course_tools.grading.engine.referee import GRADE_CELL_FILE, REPORT_EVENT, WORKER_FILE, arm, read_reports

MARK = "course-verdict-worker"
#: The folder holding the grader's helpers (argv of the worker): trusted code, for the referee.
_HELPERS_ROOT: list = [None]

#: Modules whose functions and classes checks use or stand in for; with every ``helpers`` module, the
#: surface a learner's function may not replace (tests/support/cell_runner.py watches the same for leaks).
WATCHED_MODULES = ["torch", "torch.cuda", "torch.mps", "torch.backends.cuda", "torch.backends.mps",
                   "torch.accelerator", "torch.amp", "torch.nn.functional", "torch.utils.data", "time", "timeit",
                   "statistics", "torch.distributed", "torch.testing", "torch.testing._comparison", "builtins",
                   "math", "operator", "copy", "functools", "contextlib", "traceback", "io", "warnings",
                   "logging", "cloudpickle", "pickle", "json"]
#: Classes whose methods checks use or stand in for (GradScaler spies, optimizer hooks, tensor comparison).
WATCHED_CLASSES = [("torch.amp", "GradScaler"), ("torch.optim", "Optimizer"), ("torch.nn", "Module"),
                   ("torch", "Tensor"), ("torch.utils.data", "DataLoader"), ("torch._C", "TensorBase")]


def _owners() -> dict[str, object]:
    """Name -> module or class of the watched surface, as loaded now: the watched modules and classes, every
    ``helpers`` module and the classes it defines (a counter's ``_record``), and torch's optimizers (a patched
    ``SGD.step`` would stop the reference run training too)."""
    owners: dict[str, object] = {}
    for name in WATCHED_MODULES:
        if name in sys.modules:
            owners[name] = sys.modules[name]
    for name, module in list(sys.modules.items()):
        if name == "helpers" or name.startswith("helpers."):
            owners[name] = module
            for attr, value in list(vars(module).items()):
                if isinstance(value, type) and value.__module__ == name:
                    owners[f"{name}.{attr}"] = value
    for module_name, cls_name in WATCHED_CLASSES:
        cls = getattr(sys.modules.get(module_name), cls_name, None)
        if cls is not None:
            owners[f"{module_name}.{cls_name}"] = cls
    optim = sys.modules.get("torch.optim")
    for attr, value in list(vars(optim).items()) if optim is not None else ():
        if isinstance(value, type):
            owners[f"torch.optim.{attr}"] = value
    return owners


def watched_attributes(owners: dict[str, object] | None = None) -> dict[tuple[str, str], object]:
    """Every callable attribute of the watched surface: (owner name, attribute) -> value."""
    found: dict[tuple[str, str], object] = {}
    for name, owner in (owners if owners is not None else _owners()).items():
        try:
            items = list(vars(owner).items())
        except TypeError:
            continue
        for attr, value in items:
            if type(value) in (staticmethod, classmethod):  # type(): isinstance() reads __class__, which may warn
                value = value.__func__
            if callable(value) and not (attr.startswith("__") and isinstance(owner, type(sys))):
                found[(name, attr)] = value
    return found


def what_it_is(value: object) -> tuple:
    """What a function *is*, beyond its identity: its code, defaults and closure cells' contents (by identity).

    A learner's ``check.__code__ = noop.__code__`` or ``fn.__closure__[0].cell_contents = x`` keeps the function
    object and changes what it does; comparing this tuple finds it."""
    if type(value) is not types.FunctionType:
        return ()
    code = value.__code__
    cells = []
    for cell in value.__closure__ or ():
        try:
            cells.append(id(cell.cell_contents))
        except ValueError:  # an empty cell
            cells.append(None)
    defaults = value.__defaults__ or ()
    kwdefaults = value.__kwdefaults__ or {}
    return (id(code), tuple(map(id, defaults)), tuple(sorted((k, id(v)) for k, v in kwdefaults.items())), tuple(cells))


#: Modules whose constants decide a verdict (``ch08.MAX_SYNCS``, the sync counter's file names for torch's own
#: bookkeeping, ``bench.compare``'s noise rule): their values are watched too, not only their functions.
SETTING_MODULES = ("helpers.checks.", "helpers.speed", "helpers.benchmark", "helpers.record")


def watched_settings(modules: dict[str, object]) -> dict[tuple[str, str], object]:
    """(module, name) -> what a constant of a :data:`SETTING_MODULES` module is: its identity, and for an
    ALL_CAPS list, dict or set the identities of what it holds (so ``COURSE_VERSIONS.pop(...)`` is found too).
    Lower-case module-level values (caches) are the module's own business."""
    found: dict[tuple[str, str], object] = {}
    for name, module in modules.items():
        if not name.startswith(SETTING_MODULES):
            continue
        for attr, value in list(vars(module).items()):
            if attr.startswith("__") or callable(value) or type(value) is type(sys):
                continue
            shape: object = id(value)
            if attr.lstrip("_").isupper() and type(value) in (list, dict, set):
                items = dict.items(value) if type(value) is dict else enumerate(value) if type(value) is list \
                    else ((id(v), v) for v in value)
                shape = (id(value), tuple(sorted((k if type(k) in (str, int) else str(id(k)), id(v))
                                                 for k, v in items)))
            found[(name, attr)] = shape
    return found


class Guard:
    """A snapshot of the grader's surface; :meth:`changes` names what was replaced or removed since.

    Attributes are read again from the *same* module and class objects, and each module must still be the
    one ``sys.modules`` holds, so a stand-in module or a patched function are both found; so is a function
    changed in place (:func:`what_it_is`). Values only (flags such as ``torch.backends.cudnn.benchmark``) and
    attributes added later are a learner's right.
    """

    def __init__(self) -> None:
        self.owners = _owners()
        self.attributes = watched_attributes(self.owners)
        self.shapes = {key: what_it_is(value) for key, value in self.attributes.items()}
        self.modules = {name: module for name, module in self.owners.items() if isinstance(module, type(sys))}
        self.settings = watched_settings(self.modules)

    def changes(self) -> list[str]:
        now = watched_attributes(self.owners)
        found = []
        for (owner, attr), value in self.attributes.items():
            if now.get((owner, attr), Guard) is not value:
                found.append(f"{owner}.{attr}")
            elif what_it_is(value) != self.shapes[(owner, attr)]:
                found.append(f"{owner}.{attr} (changed in place)")
        found += [f"sys.modules[{name!r}]" for name, module in self.modules.items() if sys.modules.get(name) is not module]
        now_settings = watched_settings(self.modules)
        found += [f"{owner}.{attr}" for (owner, attr), value in self.settings.items()
                  if now_settings.get((owner, attr), Guard) != value]
        return found


def prepare() -> None:
    """Import what grading uses, and make torch's lazy self-patching happen now, before any snapshot.

    ``import torch._dynamo`` wraps ``torch.manual_seed``, and the first call of some setters replaces
    torch attributes: an honest answer that triggers either must not look like tampering. Importing every
    check module once here also spares each child the import.
    """
    import importlib
    import pkgutil

    import torch

    import helpers.checks

    try:
        import torch._dynamo  # noqa: F401
    except Exception:  # noqa: BLE001 - a torch without dynamo: nothing of it to wrap
        pass
    torch.set_grad_enabled(torch.is_grad_enabled())
    torch.set_default_dtype(torch.get_default_dtype())
    torch.use_deterministic_algorithms(torch.are_deterministic_algorithms_enabled())
    torch.set_anomaly_enabled(torch.is_anomaly_enabled())
    torch.set_float32_matmul_precision(torch.get_float32_matmul_precision())
    for found in pkgutil.iter_modules(helpers.checks.__path__):
        importlib.import_module(f"helpers.checks.{found.name}")
    _hook_optimizers(torch)
    for name in ("timeit", "statistics", "cloudpickle", "IPython.display"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _hook_optimizers(torch) -> None:
    """Make one of each optimizer now: the first one of a class wraps its ``step`` for the profiler
    (``Optimizer._patch_step_function``), which must not look like a learner patching ``SGD.step``."""
    weight = torch.nn.Parameter(torch.zeros(1))
    for value in list(vars(torch.optim).values()):
        if isinstance(value, type) and issubclass(value, torch.optim.Optimizer) and value is not torch.optim.Optimizer:
            try:
                value([weight])
            except Exception:  # noqa: BLE001 - an optimizer that needs more arguments: made when a learner makes it
                pass


def bound_anywhere(tree: ast.AST) -> set[str]:
    """Every name bound anywhere in ``tree``: assignments, loop targets, defs, classes, imports."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def free_names(source: str) -> list[str]:
    """Names a grade cell reads and never assigns (the learner's definitions it needs), builtins excluded."""
    tree = ast.parse(source)
    stored = bound_anywhere(tree)
    stored |= {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}
    stored |= {node.name for node in ast.walk(tree) if isinstance(node, ast.ExceptHandler) and node.name}
    loaded = [node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)]
    return [n for n in dict.fromkeys(loaded) if n not in stored and not hasattr(builtins, n)]


#: Run in the learner's kernel: write the definitions ``names`` to ``path`` (cloudpickle, by value). An
#: object that cannot be sent is named, with what to do.
EXPORT = '''def __course_export(path, names):
    import importlib, sys, types
    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        # a module object of a ModuleType subclass (torch.backends is one) goes by name, as modules do
        def reducer_override(self, obj):
            if isinstance(obj, types.ModuleType) and sys.modules.get(obj.__name__) is obj:
                return importlib.import_module, (obj.__name__,)
            return super().reducer_override(obj)

    def dumps(obj):
        import io
        buffer = io.BytesIO()
        Pickler(buffer).dump(obj)
        return buffer.getvalue()

    found = {{n: globals()[n] for n in names if n in globals()}}
    try:
        data = dumps(found)
    except Exception:
        for n, v in found.items():
            try:
                dumps(v)
            except Exception as err:
                raise RuntimeError(f"the grader could not take `{{n}}` out of your notebook ({{type(err).__name__}}: "
                                   f"{{err}}); keep what this check uses to functions, classes and plain data") from None
        raise
    with open(path, "wb") as fh:
        fh.write(data)
__course_export({path!r}, {names!r})
del __course_export
'''


def export_code(path: str, names: list[str]) -> str:
    return EXPORT.format(path=path, names=names)


# --- the worker's side -------------------------------------------------------------------------------------

def _send(fd: int, payload: bytes) -> None:
    data = struct.pack(">Q", len(payload)) + payload
    while data:
        data = data[os.write(fd, data):]


def _recv(fd: int) -> bytes | None:
    def exactly(n: int) -> bytes | None:
        parts, got = [], 0
        while got < n:
            chunk = os.read(fd, min(n - got, 1 << 20))
            if not chunk:
                return None
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    head = exactly(8)
    return None if head is None else exactly(struct.unpack(">Q", head)[0])


def fresh_namespace() -> dict:
    """A cell's globals as a kernel starts them: ``__main__``, the builtins, IPython's ``display``."""
    namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec("from IPython.display import display", namespace)  # what a kernel provides
    except ImportError:
        pass
    return namespace


def _text(err: BaseException) -> str:
    try:
        return str(err)
    except Exception:  # noqa: BLE001 - a learner's exception whose __str__ fails is still an error
        return f"<{type(err).__name__} whose message could not be read>"


def _version_error(spec: str) -> BaseException:
    """The learner's error for a course version the referee refused (the tripwire's own message)."""
    from helpers.checks.delegation import COURSE_VERSIONS, CourseVersionCalled, message

    when = next((notes[spec] for notes in COURSE_VERSIONS.values() if spec in notes), "")
    return CourseVersionCalled(message(spec, when))


def _versions() -> dict[str, frozenset]:
    """Course-version spec -> the exercises it belongs to, frozen now, before any learner code runs."""
    from helpers.checks.delegation import COURSE_VERSIONS

    found: dict[str, set] = {}
    for exercise, notes in COURSE_VERSIONS.items():
        for spec in notes:
            found.setdefault(spec, set()).add(exercise)
    return {spec: frozenset(names) for spec, names in found.items()}


def _judge_here(source: str, blob: bytes, key: bytes, fd: int, helpers_root: str | None) -> None:
    """The child: arm the referee, load the definitions, run the grade cell, send the report; never returns."""
    try:
        loaded = arm(key=key, fd=fd, helpers_root=helpers_root, judge_code=_judge_here.__code__,
                     versions=_versions(), version_error=_version_error)
    except BaseException:  # noqa: BLE001 - no referee, no report: the cell is reported as a crash
        traceback.print_exc()
        os._exit(70)
    del key
    result: dict = {"error": None, "tampered": []}
    guard = Guard()
    try:
        import cloudpickle

        namespace = fresh_namespace()
        definitions = cloudpickle.loads(blob)
        loaded(definitions)
        namespace.update(definitions)
        exec(compile(source, GRADE_CELL_FILE, "exec"), namespace)
    except BaseException as err:  # noqa: BLE001 - any failure is the cell's outcome, as in a kernel
        lines = traceback.format_exception(type(err), err, err.__traceback__)
        result["error"] = {"ename": type(err).__name__, "evalue": _text(err), "traceback": lines[-30:]}
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    result["tampered"] = guard.changes()
    try:
        sys.audit(REPORT_EVENT, result)  # the referee signs and sends it: nothing else can
    finally:
        os._exit(0)


def _read(path: str, cap: int) -> tuple[str, bool]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(cap + 1)
    except OSError:
        return "", False
    return data[:cap].decode("utf-8", "replace"), len(data) > cap


def _subreaper() -> None:
    """Processes the child leaves behind stay below the worker, where the grader finds and stops them."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - not Linux: the sandbox's own pid namespace still holds them
        pass


def _reap() -> None:
    """Collect what earlier cells left behind and the grader killed (they are the worker's, as subreaper)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def serve() -> None:
    """The worker's loop: one request (a grade cell's source and definitions) in, one report out."""
    # The worker forks: CUDA initialised before a fork is unusable in the child ("Cannot re-initialize CUDA in
    # forked subprocess"), so on a GPU grading machine nothing here may touch the driver; an is_available()
    # at import then asks NVML instead of initialising CUDA. Only a child (a grade cell) uses the GPU.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    rfd, wfd = os.dup(0), os.dup(1)
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 0)
    os.dup2(2, 1)
    _subreaper()
    prepare()
    _send(wfd, json.dumps({"ready": True}).encode())
    while True:
        header = _recv(rfd)
        blob = _recv(rfd) if header is not None else None
        if blob is None:
            return
        request = json.loads(header)
        _reap()
        folder = tempfile.mkdtemp(prefix="verdict-")
        key = os.urandom(32)
        reports_r, reports_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            os.close(wfd)
            os.close(reports_r)
            out = os.open(os.path.join(folder, "stdout"), os.O_WRONLY | os.O_CREAT, 0o600)
            err = os.open(os.path.join(folder, "stderr"), os.O_WRONLY | os.O_CREAT, 0o600)
            os.dup2(out, 1)
            os.dup2(err, 2)
            _judge_here(request["source"], blob, key, reports_w, _HELPERS_ROOT[0])
        os.close(reports_w)
        sent, status = _collect(reports_r, pid)
        os.close(reports_r)
        cap = int(request.get("cap", 1 << 20))
        stdout, stdout_cut = _read(os.path.join(folder, "stdout"), cap)
        stderr, stderr_cut = _read(os.path.join(folder, "stderr"), cap)
        result, forged = read_reports(sent, key)
        if forged:
            result = dict(result or {"error": None}, tampered=[*(result or {}).get("tampered", []),
                                                               "wrote a report of its own to the grader's pipe"])
        report = {"stdout": stdout, "stderr": stderr, "cut": stdout_cut or stderr_cut, "result": result,
                  "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                  "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}
        _send(wfd, json.dumps(report).encode())
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def _collect(fd: int, pid: int) -> tuple[bytes, int]:
    """What the child sent on its report pipe, read while it runs (a large report must not block it), and its
    exit status, once it has ended and the pipe is drained. A process the learner's code forked may hold the
    pipe open: it is read for at most a second more, never waited for."""
    import select

    parts, status, after = [], None, 0
    os.set_blocking(fd, False)
    while status is None or after < 20:
        ready = select.select([fd], [], [], 0.05)[0]
        chunk = None
        if ready:
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                chunk = None
            if chunk:
                parts.append(chunk)
        if status is None:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status = code
        elif chunk == b"" or not chunk:
            break  # ended, and nothing more to read
        else:
            after += 1
    return b"".join(parts), status


# --- the grader's side -------------------------------------------------------------------------------------

def supported() -> bool:
    """The worker forks a child per grade cell: Linux and macOS can, Windows cannot (there checks stay in the
    kernel, and the grader says so once)."""
    return hasattr(os, "fork")


class WorkerGone(RuntimeError):
    """The worker ended (or never started): its stderr says why."""


class VerdictWorker:
    """The grader's handle on one worker: start it, hand it grade cells, stop what a cell left running.

    One worker serves one notebook's run: its start (a Python that imports torch and the checks, about two
    seconds) is paid once, and each grade cell costs a ``fork``. Under the sandbox it gets a scratch folder of
    its own: the kernel's files are not shared with it, and it sees no more of the machine than the kernel.
    """

    def __init__(self, *, sandbox: bool, course_root: str, memory_mb: int = 0, scratch_mb: int = 0,
                 python: str | None = None):
        self.sandbox, self.course_root, self.memory_mb, self.scratch_mb = sandbox, course_root, memory_mb, scratch_mb
        self.python = python or sys.executable
        self.proc = None
        self.scratch = None
        self._log = None
        self.ready = False

    # starting and stopping
    def start(self) -> "VerdictWorker":
        """Launch the worker and wait until it is ready."""
        return self.launch().wait_ready()

    def launch(self) -> "VerdictWorker":
        """Launch the worker and return at once: its imports (two seconds) overlap the kernel's start."""
        import subprocess

        from course_tools.grading.engine.sandbox import helpers_root

        # -I ignores PYTHONPATH: the folder of the grader's own helpers goes first on the worker's path instead
        cmd = [self.python, "-I", "-c", worker_program(), str(helpers_root()), MARK]
        self.scratch = tempfile.mkdtemp(prefix="grading-verdict-")
        env = None
        if self.sandbox:
            from pathlib import Path

            from course_tools.grading.engine.sandbox import bwrap_command

            cmd = bwrap_command(cmd, Path(self.scratch), Path(self.course_root), {}, tmp_mb=self.scratch_mb)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        else:
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.setdefault("MPLBACKEND", "Agg")
        linux = sys.platform.startswith("linux")
        limit = self.memory_mb * 2**20 if self.memory_mb > 0 and linux else 0
        # the learner's functions run in its children: no file they write (worker.log through stderr included)
        # grows past scratch_mb (RLIMIT_FSIZE; Python ignores SIGXFSZ, so the write fails with EFBIG)
        files = self.scratch_mb * 2**20 if self.scratch_mb > 0 and linux else 0

        def cap() -> None:
            import resource

            if limit:
                resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
            if files:
                resource.setrlimit(resource.RLIMIT_FSIZE, (files, files))

        self._log = open(os.path.join(self.scratch, "worker.log"), "w+b")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     cwd=self.scratch, env=env, preexec_fn=cap)
        self.ready = False
        return self

    def wait_ready(self) -> "VerdictWorker":
        if not self.ready:
            if _recv(self.proc.stdout.fileno()) is None:
                raise WorkerGone(f"the verdict worker did not start: {self.log_tail()}")
            self.ready = True
        return self

    def log_tail(self, chars: int = 600) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0, os.SEEK_END)  # only the tail: the learner's code can fill the log up to scratch_mb
        self._log.seek(max(0, self._log.tell() - 8 * chars))
        text = self._log.read(8 * chars).decode("utf-8", "replace").strip()
        return text[-chars:] or "(it wrote nothing)"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        import shutil

        if self.proc is not None:
            for proc in self._tree():
                _kill(proc)
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.kill()
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - already gone
                pass
            self.proc.stdout.close()
        if self._log is not None:
            self._log.close()
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
        self.proc = self._log = self.scratch = None

    # one grade cell
    def judge(self, source: str, blob: bytes, cap: int) -> dict | None:
        """Run one grade cell on the definitions ``blob``; its report, or None when the worker itself died."""
        try:
            _send(self.proc.stdin.fileno(), json.dumps({"source": source, "cap": cap}).encode())
            _send(self.proc.stdin.fileno(), blob)
            reply = _recv(self.proc.stdout.fileno())
        except OSError:
            reply = None
        finally:
            self.stop_leftovers()
        return None if reply is None else json.loads(reply)

    def _tree(self) -> list:
        from course_tools.grading.engine.watchdog import family

        return family(self.proc.pid)

    def stop_leftovers(self) -> None:
        """Kill every process below the worker (the running cell, what it started), never the worker."""
        import psutil

        tree = self._tree()
        sandbox = {p.pid for p in tree if _name(p) == "bwrap"}  # its command line names MARK too
        marked = set()
        for proc in tree:
            try:
                if proc.pid not in sandbox and MARK in proc.cmdline():
                    marked.add(proc.pid)
            except psutil.Error:
                pass
        worker = {p.pid for p in tree if p.pid in marked and _parent_pid(p) not in marked}
        keep = sandbox | worker | {self.proc.pid}
        for proc in tree:
            if proc.pid not in keep:
                _kill(proc)


def _parent_pid(proc) -> int | None:
    try:
        return proc.ppid()
    except Exception:  # noqa: BLE001
        return None


def _name(proc) -> str:
    try:
        return proc.name()
    except Exception:  # noqa: BLE001
        return ""


def _kill(proc) -> None:
    try:
        proc.kill()
    except Exception:  # noqa: BLE001 - already gone
        pass


#: The worker's whole program: referee.py and this file, run in a namespace of their own. Nothing of it is
#: bound in ``__main__`` or ``sys.modules``, so learner code finds no handle on the worker's functions or state
#: (frames and ``gc``, the other ways in, are the referee's to refuse).
BOOT = """def __boot(sources):
    namespace = {{"__name__": "course_verdict_worker", "__builtins__": __builtins__}}
    for text in sources:
        exec(compile(text, {name!r}, "exec"), namespace)
    namespace["main"]()
__boot({sources!r})
"""


def worker_program() -> str:
    """``python -c`` source of the worker: :data:`BOOT` with the source of referee.py and of this file."""
    here = os.path.dirname(os.path.abspath(__file__))
    sources = []
    for name in ("referee.py", "apart_worker.py"):
        with open(os.path.join(here, name), encoding="utf-8") as fh:
            sources.append(fh.read())
    return BOOT.format(name=WORKER_FILE, sources=sources)


def main() -> None:
    """The worker's entry point (:data:`BOOT`): argv is ``[-c, helpers folder, MARK]``."""
    if len(sys.argv) > 2:  # the folder holding the grader's helpers (VerdictWorker.launch): imported from there
        sys.path.insert(0, sys.argv[-2])
        _HELPERS_ROOT[0] = sys.argv[-2]
    serve()
