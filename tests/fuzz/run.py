"""The fuzzer's driver: python tests/fuzz/run.py [--count N] [--seed S] [--out DIR].

Generates programs (seed S, indices 0..N-1), checks each eagerly and compiled, shrinks
failures and writes them to DIR as standalone pytest files. Before each program its
source goes to DIR/last_program.py, so a crash of the process leaves a reproducer
(regenerate it with --seed S --start I --count 1).
Exit status 1 when something failed."""
import argparse
import os
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--start", type=int, default=0, help="first program index")
    ap.add_argument("--out", default=os.path.join(HERE, "failures"))
    ap.add_argument("--families", default=None, help="comma-separated op families (tests/fuzz/ops.py)")
    args = ap.parse_args(argv)
    fams = args.families.split(",") if args.families else None
    t = time.time()
    print(f"framejit fuzz: seed {args.seed}, programs {args.start}..{args.start + args.count - 1}")
    os.makedirs(args.out, exist_ok=True)
    failures = fuzz(args.count, args.seed, args.out, fams, start=args.start,
                    crash_file=os.path.join(args.out, "last_program.py"))
    print(f"{args.count} programs in {time.time() - t:.1f} s, {len(failures)} failing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
