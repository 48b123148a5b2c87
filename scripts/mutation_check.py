"""Plant typical bugs in the catalog, one at a time, and check that the formula tests catch every one.

Each mutant is a small text edit of one file of ``normtrain/`` (a gain swapped between two norms, a norm moved
across RoPE or an activation, a scale off by one layer, ...). The script copies the package into a temporary
folder, plants the edit there (never in the work tree), runs the tests that must catch it against the copy
(``tests/model/test_formulas.py``; for the optimizer's split and QK-Clip ``tests/training/test_optim.py`` too; for
nGPT its formula tests and the training-loop tests of its weight rule) and counts the mutant caught when a test fails.
A survivor names a formula no test pins: add the test.

    python scripts/mutation_check.py               # every mutant; prints caught/planted and any survivor
    python scripts/mutation_check.py --list        # the mutants, by kind
    python scripts/mutation_check.py --only NAME…  # some of them
    python scripts/mutation_check.py --jobs 2      # in parallel

Exit status: 0 when every planted mutant was caught, 1 when one survived, 2 when a mutant no longer applies to
the code (its text is not found exactly once: update it with the code).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants import MUTANTS, Mutant  # noqa: E402 (the catalog beside this script)


def planted(mutant: Mutant, package: Path) -> None:
    """Apply ``mutant`` to the copy of the package at ``package``; ValueError if its text is not found once."""
    path = package / mutant.path
    text = path.read_text()
    for old, new in mutant.edits:
        if text.count(old) != 1:
            raise ValueError(f"{mutant.name}: {old!r} occurs {text.count(old)} times in normtrain/{mutant.path}, "
                             "not once: update the mutant with the code")
        text = text.replace(old, new)
    path.write_text(text)


def check_applicable() -> list[str]:
    """Every mutant's problems applying to today's code (empty when all apply), without running anything."""
    problems = []
    for mutant in MUTANTS:
        text = (ROOT / "normtrain" / mutant.path).read_text()
        for old, new in mutant.edits:
            if text.count(old) != 1:
                problems.append(f"{mutant.name}: {old[:60]!r}… occurs {text.count(old)} times in {mutant.path}")
                break
            text = text.replace(old, new)
    return problems


def run_tests(mutant: Mutant | None, work: Path) -> tuple[bool, str]:
    """(did a formula test fail?, the test that failed, with why) with ``mutant`` planted in a copy in ``work``."""
    copy = work / (mutant.name if mutant else "unmutated")
    shutil.copytree(ROOT / "normtrain", copy / "normtrain", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "configs").symlink_to(ROOT / "configs")  # the training-loop tests compose configs next to the package
    if mutant:
        planted(mutant, copy / "normtrain")
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONWARNINGS": "ignore"}
    # The working directory is the copy, so ``import normtrain`` finds it first (before the editable install).
    probe = subprocess.run([sys.executable, "-c", "import normtrain; print(normtrain.__file__)"], cwd=copy,
                           env=env, capture_output=True, text=True)
    if not probe.stdout.strip().startswith(str(copy)):
        raise RuntimeError(f"the copy was not the package imported: {probe.stdout or probe.stderr}")
    tests = mutant.tests if mutant else sorted({t for mu in MUTANTS for t in mu.tests})
    proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                           *(str(ROOT / t) for t in tests)], cwd=copy, env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"pytest could not run the tests on {copy.name} (exit {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    failed = [line.removeprefix("FAILED ") for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
    return proc.returncode == 1, (failed[0].split("::", 1)[-1][:110] if failed else proc.stdout[-500:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", metavar="NAME", help="these mutants only")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument("--jobs", type=int, default=1, help="mutants tested at once")
    args = p.parse_args(argv)
    if args.list:
        for mutant in MUTANTS:
            print(f"{mutant.kind:28s} {mutant.name}  (normtrain/{mutant.path})")
        return 0
    if problems := check_applicable():
        print("mutants that no longer apply:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    chosen = [mu for mu in MUTANTS if not args.only or mu.name in args.only]
    if args.only and (unknown := set(args.only) - {mu.name for mu in chosen}):
        print(f"unknown mutants: {', '.join(sorted(unknown))}; see --list", file=sys.stderr)
        return 2
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="normtrain-mutants-") as tmp:
        failed, out = run_tests(None, Path(tmp))
        if failed:
            print(f"the formula tests fail on the unmutated code:\n{out}", file=sys.stderr)
            return 2
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            results = list(pool.map(lambda mu: (mu, *run_tests(mu, Path(tmp))), chosen))
    survivors = [mu for mu, caught, _ in results if not caught]
    for mu, caught, by in results:
        print(f"{'caught  ' if caught else 'SURVIVED'} {mu.kind:27s} {mu.name:42s} {by if caught else ''}")
    kinds = sorted({mu.kind for mu in chosen})
    print(f"mutation score: {len(chosen) - len(survivors)}/{len(chosen)} caught ({len(kinds)} kinds: "
          f"{', '.join(kinds)}) in {time.perf_counter() - started:.0f} s")
    if survivors:
        print("survivors (a formula no test pins): " + ", ".join(mu.name for mu in survivors))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
