"""Runs corpus cases eagerly and through framejit, and classifies each one.

run_case(case) -> dict: the case's status is
  "whole"    compiled, no graph break, no fallback;
  "breaks"   compiled with at least one graph break, no fallback;
  "fallback" a call ran in CPython (a fallback) or nothing was compiled;
  "wrong"    a result, an argument after the call, or a raised exception differs from eager's;
  "crash"    framejit raised where eager did not (and, under scripts/coverage, the
             process died or hung in the case).
with the first reason framejit gave (raw and normalised so that equal causes group).

As a script this is scripts/coverage: every group runs in a child process; a child
that dies or hangs marks its current case "crash" and a new child goes on with the
rest. Prints a table (per group and in total) and the top reasons, and writes JSON."""
import argparse
import enum
import json
import math
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from corpus.registry import load  # noqa: E402

# Children run with -S when this process does (a worktree's build on PYTHONPATH).
PYTHON = [sys.executable, "-S"] if sys.flags.no_site else [sys.executable]
STATUSES = ("whole", "breaks", "fallback", "wrong", "crash")
RTOL, ATOL = 1e-5, 1e-6
MAX_DEPTH = 24
STARTUP_S = 900  # a child's imports may rebuild the editable install first


# ---- reasons ----

_VALUE_BEFORE = re.compile(r"\b(of|over|and|on|key|with) $")


def _value_end(s, i):
    """The index after the literal (a bracketed display or a quoted string) at s[i]."""
    if s[i] in "'\"":
        j = i + 1
        while j < len(s) and s[j] != s[i]:
            j += 2 if s[j] == "\\" else 1
        return j + 1
    depth, j = 0, i
    while j < len(s):
        if s[j] in "'\"":
            j = _value_end(s, j)
            continue
        if s[j] in "[({":
            depth += 1
        elif s[j] in "])}":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(s)


def _mask_values(s):
    """Python values written into a reason (`iterating over [1, 2]`, `of 'abc'`) as
    their kind (`<list>`, `<str>`), where they follow of/over/and/on/key/with outside
    a `<...>` repr."""
    out, i, angle = [], 0, 0
    while i < len(s):
        if s[i] == "<":
            angle += 1
        elif s[i] == ">" and angle:
            angle -= 1
        elif not angle and s[i] in "[({'\"" and _VALUE_BEFORE.search("".join(out[-8:])):
            j = _value_end(s, i)
            body = s[i:j]
            if s[i] in "'\"":
                out.append("<str>")
            elif s[i] == "[":
                out.append("<list>")
            elif s[i] == "(":
                out.append("<tuple>")
            else:
                out.append("<dict>" if ":" in body or body == "{}" else "<set>")
            i = j
            continue
        out.append(s[i])
        i += 1
    return "".join(out)


def normalise(reason):
    """The reason with what varies between equal causes taken out: object addresses,
    graph values with their types (`%3:f32[s0]`), sizes and symbols, file paths, line
    numbers, the corpus's module names, Python values written into the reason, and the
    wrapping `call to F (graph break: ...)` of a break inside a called function (the
    inner reason is the cause)."""
    if not reason:
        return reason
    s = reason
    while True:
        m = re.fullmatch(r"call to .*? \(graph break: (.*)\)", s, re.S)
        if not m:
            break
        s = m.group(1)
    s = re.sub(r"<(function|class|bound method|method|built-in method|cell) ([\w.<>]+) at 0x[0-9a-fA-F]+>",
               lambda m: f"<{m.group(1)} {m.group(2).rsplit('.', 1)[-1]}>", s)
    s = re.sub(r" (object )?at 0x[0-9a-fA-F]+", "", s)
    s = re.sub(r"0x[0-9a-fA-F]+", "0x?", s)
    s = re.sub(r"\bcorpus\.cases_\w+\.", "", s)
    s = re.sub(r"\ban? [A-Z_]\w* (object )?made in the frame", "an object made in the frame", s)
    s = re.sub(r"%\d+(:[a-z]+\d*\[[^\]]*\])?", "%N", s)
    s = re.sub(r"\b([a-z]+\d*)\[(?:[su]?\d+(?:, ?[su]?\d+)*)?\]", r"\1[...]", s)
    s = re.sub(r"\b([sf])\d+\b", r"\1N", s)
    s = re.sub(r"(?:[A-Za-z]:)?(?:/[^\s:'\"()<>,]+)+\.py", "<file>", s)
    s = re.sub(r"(<file>|<string>|<stdin>|\.py):\d+", r"\1", s)
    s = re.sub(r"\bline \d+", "line N", s)
    s = _mask_values(s)
    return s.strip()


def strip_addresses(text):
    return re.sub(r"0x[0-9a-fA-F]+", "0x?", text)


# ---- comparison ----

def _float_close(a, e):
    if math.isnan(e):
        return math.isnan(a)
    if math.isinf(e):
        return a == e
    return abs(a - e) <= ATOL + RTOL * abs(e)


def diff(actual, expected, path="result", depth=0):
    """None when actual (framejit's) matches expected (eager's); else what differs."""
    import numpy as np
    import torch

    if depth > MAX_DEPTH:
        return None
    if isinstance(expected, BaseException):
        if type(actual) is not type(expected):
            return f"{path}: raised {type(actual).__name__}, eager raised {type(expected).__name__}"
        if strip_addresses(str(actual)) != strip_addresses(str(expected)):
            return f"{path}: message {str(actual)!r}, eager {str(expected)!r}"
        return None
    if type(actual) is not type(expected):
        return f"{path}: type {type(actual).__name__}, eager {type(expected).__name__}"
    if isinstance(expected, torch.Tensor):
        for what in ("dtype", "shape", "device", "requires_grad", "layout"):
            a, e = getattr(actual, what), getattr(expected, what)
            if a != e:
                return f"{path}: {what} {a}, eager {e}"
        a, e = actual.detach(), expected.detach()
        if e.dtype.is_floating_point or e.dtype.is_complex:
            try:
                torch.testing.assert_close(a, e, rtol=RTOL, atol=ATOL, equal_nan=True)
            except AssertionError as err:
                return f"{path}: values differ: {' '.join(str(err).split())[:300]}"
        elif not torch.equal(a, e):
            return f"{path}: values {a.tolist()}, eager {e.tolist()}"[:400]
        return None
    if isinstance(expected, np.ndarray):
        if actual.dtype != expected.dtype or actual.shape != expected.shape:
            return f"{path}: array {actual.dtype}{actual.shape}, eager {expected.dtype}{expected.shape}"
        if not np.allclose(actual, expected, rtol=RTOL, atol=ATOL, equal_nan=True) if expected.dtype.kind in "fc" \
                else not np.array_equal(actual, expected):
            return f"{path}: array values differ"
        return None
    if isinstance(expected, (float, np.floating)):
        return None if _float_close(float(actual), float(expected)) else f"{path}: {actual!r}, eager {expected!r}"
    if isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            return f"{path}: length {len(actual)}, eager {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            d = diff(a, e, f"{path}[{i}]", depth + 1)
            if d:
                return d
        return None
    if isinstance(expected, dict):
        if list(actual) != list(expected):
            return f"{path}: keys {list(actual)!r}, eager {list(expected)!r}"[:400]
        for k in expected:
            d = diff(actual[k], expected[k], f"{path}[{k!r}]", depth + 1)
            if d:
                return d
        return None
    if isinstance(expected, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)):
        if getattr(actual, "__qualname__", None) != getattr(expected, "__qualname__", None):
            return f"{path}: {actual!r}, eager {expected!r}"
        return None
    if isinstance(expected, (int, bool, str, bytes, complex, type(None), set, frozenset, range,
                             enum.Enum, np.generic, torch.dtype, torch.device)) or not hasattr(expected, "__dict__"):
        try:
            same = actual == expected
            same = bool(same)
        except Exception:  # noqa: BLE001 - an == that does not give a bool: fall back to identity
            same = actual is expected
        return None if same else f"{path}: {actual!r}, eager {expected!r}"[:400]
    # another object: the same attributes, compared recursively
    return diff(vars(actual), vars(expected), f"{path}.__dict__", depth + 1)


# ---- running ----

def _run_calls(c, fn):
    """Each call on fresh inputs: (outcome, value or exception, args after, kwargs after)."""
    import torch

    out = []
    for i in range(len(c.calls)):
        args, kwargs = c.inputs(i)
        torch.manual_seed(7)  # the same generator state for eager and compiled calls
        try:
            out.append(("ok", fn(*args, **kwargs), args, kwargs))
        except Exception as e:  # noqa: BLE001 - a case may raise on purpose
            out.append(("raise", e, args, kwargs))
    return out


def _first_reason(c):
    """The first reason framejit gives for the case's breaks or fallbacks: (reason, location)."""
    import framejit

    recent = framejit.fallbacks(c.fn)
    if recent:
        return recent[0].reason, recent[0].location
    for i in range(len(c.calls)):
        args, kwargs = c.inputs(i)
        try:
            e = framejit.explain(c.fn, *args, **kwargs)
        except Exception:  # noqa: BLE001 - explain re-raises what the case raises
            continue
        if e.graph_breaks:
            return e.graph_breaks[0].reason, e.graph_breaks[0].location
    # e.g. the break was on a call that raises, where explain has no output to give
    return "(no reason given: fallbacks() and explain() name none)", None


def run_case(c):
    """Runs one case eagerly and compiled (fresh inputs each) and classifies it."""
    import framejit

    t0 = time.perf_counter()
    framejit.reset()
    result = {"id": c.id, "group": c.group, "name": c.name, "status": None, "detail": None,
              "reason": None, "reason_norm": None, "location": None, "stats": None}
    try:
        eager = _run_calls(c, c.fn)
        compiled_fn = framejit.compile(c.fn)
        got = _run_calls(c, compiled_fn)
        stats = framejit.stats(c.fn)
        result["stats"] = dict(stats)
        for i, (e, g) in enumerate(zip(eager, got)):
            if g[0] == "raise" and e[0] == "ok":
                err = g[1]
                result["status"] = "crash"
                result["detail"] = f"call {i}: framejit raised {type(err).__name__}: {err}"[:2000]
                result["traceback"] = "".join(traceback.format_exception(err))[-4000:]
                break
            d = (diff(g[1], e[1], f"call {i}: result") or diff(g[2], e[2], f"call {i}: args after")
                 or diff(g[3], e[3], f"call {i}: kwargs after"))
            if d:
                result["status"] = "wrong"
                result["detail"] = d
                break
        if result["status"] is None:
            if stats["fallbacks"] or not stats["compiles"]:
                result["status"] = "fallback"
            elif stats["graph_breaks"]:
                result["status"] = "breaks"
            else:
                result["status"] = "whole"
        if result["status"] != "whole":
            reason, location = _first_reason(c)
            result["reason"], result["location"] = reason, location
            result["reason_norm"] = normalise(reason)
    except Exception as err:  # noqa: BLE001 - the runner's own failure, or framejit's outside a call
        result["status"] = "crash"
        result["detail"] = f"runner raised {type(err).__name__}: {err}"[:2000]
        result["traceback"] = traceback.format_exc()[-4000:]
    finally:
        framejit.reset()
    result["seconds"] = round(time.perf_counter() - t0, 4)
    return result


# ---- scripts/coverage ----

def child(group, skip):
    """Runs the group's cases from index `skip` on, one result line each."""
    import faulthandler
    faulthandler.enable()  # a crash leaves its Python stack on stderr, which the parent keeps
    cases = load(group)
    import framejit  # noqa: F401 - imported (and, if out of date, rebuilt) before the first case
    print("CORPUS-READY", flush=True)
    for c in cases[skip:]:
        print(f"CORPUS-START {c.id}", flush=True)
        r = run_case(c)
        print("CORPUS-RESULT " + json.dumps(r, default=str), flush=True)
    print("CORPUS-DONE", flush=True)
    return 0


def _reader(stream, q):
    for line in stream:
        q.put(line)
    q.put(None)


def run_group(group, ids, timeout, log):
    """Runs a group in child processes; a death or a hang is that case's crash and a
    new child takes the next case. Returns the results in case order."""
    results = {}
    skip = 0
    while skip < len(ids):
        with tempfile.TemporaryFile(mode="w+") as err:
            proc = subprocess.Popen(PYTHON + [os.path.abspath(__file__), "--child", group, "--skip", str(skip)],
                                    stdout=subprocess.PIPE, stderr=err, text=True, cwd=os.getcwd())
            q = queue.Queue()
            threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
            current, why, ready = None, None, False
            while True:
                wait = timeout if ready else max(timeout, STARTUP_S)
                try:
                    line = q.get(timeout=wait)
                except queue.Empty:
                    why = f"hung: no output within {wait} s"
                    proc.kill()
                    break
                if line is None:
                    break
                ready = True
                if line.startswith("CORPUS-START "):
                    current = line.split(None, 1)[1].strip()
                elif line.startswith("CORPUS-RESULT "):
                    r = json.loads(line.split(None, 1)[1])
                    results[r["id"]] = r
                    current = None
                elif line.startswith("CORPUS-DONE"):
                    break
            rc = proc.wait()
            err.seek(0)
            tail = err.read()[-3000:]
        done = [i for i in ids if i in results]
        if len(done) == len(ids):
            break
        # the child died (or hung) in `current`, or before starting the first case
        victim = current or ids[len(done)]
        if why is None:
            why = f"process died (exit status {rc})"
        log(f"  {victim}: crash ({why})")
        g, _, name = victim.partition("/")
        results[victim] = {"id": victim, "group": g, "name": name, "status": "crash",
                           "detail": f"{why}; stderr: {tail}", "reason": None, "reason_norm": None,
                           "location": None, "stats": None, "seconds": None}
        skip = ids.index(victim) + 1
    return [results[i] for i in ids]


def summarise(results, groups):
    def counts(rs):
        d = {"cases": len(rs)}
        for s in STATUSES:
            d[s] = sum(r["status"] == s for r in rs)
        d["share"] = {s: (d[s] / len(rs) if rs else 0.0) for s in STATUSES}
        d["with_deopts"] = sum(bool(r["stats"] and r["stats"].get("deopts")) for r in rs)
        return d

    per_group = {g: counts([r for r in results if r["group"] == g]) for g in groups}
    reasons = {}
    for r in results:
        if r.get("reason_norm"):
            e = reasons.setdefault(r["reason_norm"], {"reason": r["reason_norm"], "count": 0,
                                                      "status": {}, "cases": []})
            e["count"] += 1
            e["status"][r["status"]] = e["status"].get(r["status"], 0) + 1
            e["cases"].append(r["id"])
    ranked = sorted(reasons.values(), key=lambda e: (-e["count"], e["reason"]))
    return {"total": counts(results), "groups": per_group, "reasons": ranked}


def print_table(summary, top, out=print):
    cols = ("cases",) + STATUSES
    width = max([len(g) for g in summary["groups"]] + [5]) + 2
    out(f"{'group':<{width}}" + "".join(f"{c:>10}" for c in cols))

    def row(name, d):
        out(f"{name:<{width}}{d['cases']:>10}" + "".join(f"{100 * d['share'][s]:>9.1f}%" for s in STATUSES))
    for g, d in summary["groups"].items():
        row(g, d)
    row("total", summary["total"])
    t = summary["total"]
    out("counts: " + ", ".join(f"{s} {t[s]}" for s in STATUSES)
        + f"; cases with deopts (the rest of a frame handed to CPython midway): {t['with_deopts']}")
    out("")
    out(f"top reasons (normalised; {len(summary['reasons'])} distinct):")
    for e in summary["reasons"][:top]:
        st = ", ".join(f"{k} {v}" for k, v in sorted(e["status"].items()))
        out(f"{e['count']:>5}  {e['reason']}  [{st}]")


def main(argv=None):
    p = argparse.ArgumentParser(prog="scripts/coverage", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", default="coverage.json", help="where to write the JSON (default ./coverage.json)")
    p.add_argument("--group", action="append", help="run only this group (repeatable)")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="groups run at once")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a case may take before it counts as hung")
    p.add_argument("--top", type=int, default=25, help="how many reasons to print")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--skip", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.child, args.skip)

    t0 = time.perf_counter()
    # Imported here first so that an editable build that is out of date rebuilds
    # once, before the children start, rather than in several children at once.
    import framejit  # noqa: F401
    cases = load()
    groups = []
    for c in cases:
        if c.group not in groups:
            groups.append(c.group)
    if args.group:
        unknown = [g for g in args.group if g not in groups]
        if unknown:
            p.error(f"unknown group(s) {', '.join(unknown)}; groups: {', '.join(groups)}")
        groups = [g for g in groups if g in args.group]
    ids = {g: [c.id for c in cases if c.group == g] for g in groups}

    lock = threading.Lock()

    def log(msg):
        with lock:
            print(msg, flush=True)

    from concurrent.futures import ThreadPoolExecutor

    def one(g):
        t = time.perf_counter()
        rs = run_group(g, ids[g], args.timeout, log)
        n = {s: sum(r["status"] == s for r in rs) for s in STATUSES}
        log(f"{g}: {len(rs)} cases in {time.perf_counter() - t:.1f} s: "
            + ", ".join(f"{s} {n[s]}" for s in STATUSES))
        return rs

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        per_group = list(pool.map(one, groups))
    results = [r for rs in per_group for r in rs]
    summary = summarise(results, groups)
    seconds = time.perf_counter() - t0

    print()
    print_table(summary, args.top)
    bad = [r for r in results if r["status"] in ("wrong", "crash")]
    if bad:
        print()
        print(f"wrong or crashed ({len(bad)}):")
        for r in bad:
            print(f"  {r['status']:<6} {r['id']}: {(r['detail'] or '')[:300]}")
    print(f"\n{len(results)} cases in {seconds:.1f} s; JSON in {args.json}")
    with open(args.json, "w") as fh:
        json.dump({"seconds": round(seconds, 1), **summary, "cases": results}, fh, indent=1, default=str)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
