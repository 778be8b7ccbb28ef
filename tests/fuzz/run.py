"""The fuzzer's driver: python tests/fuzz/run.py [--count N] [--seed S] [--out DIR].

Generates programs (seed S, indices 0..N-1), checks each eagerly and compiled, shrinks
failures and writes them to DIR as standalone pytest files. Before each program its
source goes to DIR/last_program.py, so a crash of the process leaves a reproducer
(regenerate it with --seed S --start I --count 1). The programs run in a child
process: when it crashes (a segfault, an abort), the crash is counted as a failure,
its program is kept as DIR/crash_S_I.py, and a new child goes on with the next one.
Exit status 1 when something failed."""
import argparse
import os
import shutil
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from check import check, shrink, write_test  # noqa: E402
from gen import generate  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def fuzz(count, seed, out=None, families=None, log=print, start=0, crash_file=None):
    """Checks programs start..start+count-1 of `seed`; failures are shrunk and, with
    `out`, written there. With `crash_file`, each program's source is written there
    before it runs. Returns a list of (program, input set indices, failure, path)."""
    failures = []
    for i in range(start, start + count):
        prog = generate(seed, i, families)
        if crash_file:
            with open(crash_file, "w") as fh:
                fh.write(f"# framejit fuzz: seed {seed} program {i} (the last one started)\n" + prog.source())
        try:
            failure = check(prog)
        except Exception:  # noqa: BLE001 - a bug of the checker or framejit's own crash-free error
            failure = "checker raised:\n" + traceback.format_exc()
        if failure is None:
            continue
        small, sets, why = prog, list(range(len(prog.input_sets))), failure
        if not failure.startswith("checker raised"):
            small, sets, why = shrink(prog)
        path = write_test(small, [prog.inputs(k) for k in sets], why, out) if out else None
        failures.append((small, sets, why, path))
        log(f"FAIL seed {seed} program {i}: {why}" + (f"\n  -> {path}" if path else ""))
        log(small.source())
    return failures


def child(args, fams):
    """Runs the programs in this process; the last line says how many failed."""
    failures = fuzz(args.count, args.seed, args.out, fams, start=args.start,
                    log=lambda *a: print(*a, flush=True), crash_file=os.path.join(args.out, "last_program.py"))
    print(f"CHILD-DONE {len(failures)}", flush=True)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--start", type=int, default=0, help="first program index")
    ap.add_argument("--out", default=os.path.join(HERE, "failures"))
    ap.add_argument("--families", default=None, help="comma-separated op families (tests/fuzz/ops.py)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    fams = args.families.split(",") if args.families else None
    os.makedirs(args.out, exist_ok=True)
    if args.child:
        return child(args, fams)
    t = time.time()
    end = args.start + args.count
    print(f"framejit fuzz: seed {args.seed}, programs {args.start}..{end - 1}", flush=True)
    wrong, crashes, start = 0, [], args.start
    crash_file = os.path.join(args.out, "last_program.py")
    while start < end:
        cmd = [sys.executable] + (["-S"] if sys.flags.no_site else []) + [
            os.path.abspath(__file__), "--child", "--seed", str(args.seed), "--start", str(start),
            "--count", str(end - start), "--out", args.out] + (["--families", args.families] if fams else [])
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        done = None
        for line in proc.stdout:
            if line.startswith("CHILD-DONE "):
                done = int(line.split()[1])
            else:
                wrong += line.startswith("FAIL seed ")
                print(line, end="", flush=True)
        rc = proc.wait()
        if done is not None and rc == 0:
            break
        # The child died: the program it had started is the crash.
        with open(crash_file) as fh:
            head = fh.readline()
        index = int(head.split("program ")[1].split()[0])
        kept = os.path.join(args.out, f"crash_{args.seed}_{index}.py")
        shutil.copy(crash_file, kept)
        crashes.append(index)
        print(f"CRASH seed {args.seed} program {index}: the process died (status {rc}) -> {kept}", flush=True)
        start = index + 1
    print(f"{args.count} programs in {time.time() - t:.1f} s, {wrong} failing, {len(crashes)} crashing"
          + (f" (programs {crashes})" if crashes else ""), flush=True)
    return 1 if wrong or crashes else 0


if __name__ == "__main__":
    sys.exit(main())
