"""Per language: the sandbox's throughput against `subprocess.run` of the same program, same tests.

For each language (Python, C++, Java, JavaScript, Go, Rust) builds `--responses` distinct programs
(a+b over stdin, each with its own comment so nothing is shared) with `--tests` stdio tests each,
and runs every response, in one run, with:

  (a) the program built once per response on the host with the same command line as the
      sandbox's (`reward_specs.code.languages`), then one `subprocess.run(..., timeout=5)` per test
      in a private temporary directory, no isolation at all; as many responses at a time as
      there are cores;
  (b) `backend.run(stdio_request(...))` on each backend of `--backends` (the build step, then
      one execution per test), a pool of one sandbox per core and as many responses at once.

Prints responses/s for each and the ratio (b)/(a), and checks that every test's output is the
expected sum under both. `--short` (or PROCTOR_SHORT=1): 4 responses of 3 tests per language.
Exits non-zero when an output is wrong.

    python benchmarks/lang_throughput.py [--responses 40] [--tests 10] [--backends local,docker]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from reward_specs.code.languages import LANGUAGES
from reward_specs.code.reference import CodeConfig, StdioTests
from reward_specs.code.requests import stdio_request
from sandboxes import SandboxBackend, SandboxSettings, open_backend

CORES = max(1, len(os.sched_getaffinity(0)))
IMAGE = os.environ.get("PROCTOR_SANDBOX_IMAGE", "proctor-sandbox:2")
CONFIG = CodeConfig()

SOURCES = {
    "python": "# {k}\na, b = map(int, input().split())\nprint(a + b)\n",
    "cpp": "// {k}\n#include <iostream>\nint main() {{ long long a, b; std::cin >> a >> b; "
    "std::cout << a + b << std::endl; }}\n",
    "java": "// {k}\nimport java.util.*;\npublic class Main {{ public static void main(String[] x) "
    "{{ Scanner s = new Scanner(System.in); "
    "System.out.println(s.nextLong() + s.nextLong()); }} }}\n",
    "javascript": "// {k}\nconst [a, b] = require('fs').readFileSync(0, 'utf8').trim()"
    ".split(/\\s+/).map(Number);\nconsole.log(a + b);\n",
    "go": '// {k}\npackage main\n\nimport "fmt"\n\nfunc main() {{\n\tvar a, b int64\n'
    "\tfmt.Scan(&a, &b)\n\tfmt.Println(a + b)\n}}\n",
    "rust": "// {k}\nuse std::io::Read;\nfn main() {{ let mut s = String::new(); "
    "std::io::stdin().read_to_string(&mut s).unwrap(); let v: Vec<i64> = s.split_whitespace()"
    '.map(|t| t.parse().unwrap()).collect(); println!("{{}}", v[0] + v[1]); }}\n',
}


def tests_for(k: int, n: int) -> list[tuple[str, str]]:
    return [(f"{k} {t}\n", f"{k + t}") for t in range(n)]


def baseline(language: str, code: str, tests: list[tuple[str, str]]) -> bool:
    """Build on the host once, then one subprocess.run per test; True when all outputs match."""
    with tempfile.TemporaryDirectory() as work:
        if language == "python":
            source, build, run = "main.py", None, ("/usr/bin/python3", "-I", "main.py")
        else:
            plan = LANGUAGES[language].plan(code.encode(), CONFIG.memory_mb << 20, CONFIG.cpp_flags)
            source, build, run = plan.source_file, plan.build, plan.run
        with open(os.path.join(work, source), "w") as f:
            f.write(code)
        if build is not None:
            subprocess.run(build, cwd=work, capture_output=True, timeout=60, check=True)
        ok = True
        for stdin, expected in tests:
            p = subprocess.run(run, cwd=work, input=stdin.encode(), capture_output=True, timeout=5)
            ok &= p.stdout.decode().strip() == expected
        return ok


def measure(n: int, one: Callable[[int], bool]) -> tuple[float, int]:
    start = time.perf_counter()
    with ThreadPoolExecutor(CORES) as pool:
        wrong = sum(not ok for ok in pool.map(one, range(n)))
    return n / (time.perf_counter() - start), wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--responses", type=int, default=40)
    parser.add_argument("--tests", type=int, default=10)
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--short", action="store_true")
    args = parser.parse_args()
    if args.short or os.environ.get("PROCTOR_SHORT") == "1":
        args.responses, args.tests = 4, 3
    backends = {
        name: open_backend(SandboxSettings(backend=name, pool_size=CORES, image=IMAGE))  # type: ignore[arg-type]
        for name in args.backends.split(",")
    }
    print(f"{CORES} cores, {args.responses} responses x {args.tests} stdio tests per language")
    failures = 0
    try:
        for language, template in SOURCES.items():
            codes = [template.format(k=k) for k in range(args.responses)]

            def base_one(k: int, language: str = language, codes: list[str] = codes) -> bool:
                return baseline(language, codes[k], tests_for(k, args.tests))

            base, wrong = measure(args.responses, base_one)
            failures += wrong
            line = f"{language:10} (a) subprocess.run {base:6.2f} resp/s"
            for name, backend in backends.items():

                def ours(
                    k: int,
                    language: str = language,
                    codes: list[str] = codes,
                    backend: SandboxBackend = backend,
                ) -> bool:
                    cases = tests_for(k, args.tests)
                    tests = StdioTests.model_validate(
                        {"stdio": [{"input": i, "output": o} for i, o in cases]}
                    )
                    request = stdio_request(codes[k].encode(), language, tests, CONFIG)  # type: ignore[arg-type]
                    run = backend.run(request)
                    return all(
                        ex.stdout.decode().strip() == o
                        for ex, (_, o) in zip(run.executions, cases, strict=True)
                    )

                rate, wrong = measure(args.responses, ours)
                failures += wrong
                line += f"  (b) {name} {rate:6.2f} resp/s = {rate / base:4.2f}x"
            print(line, flush=True)
    finally:
        for backend in backends.values():
            backend.close()
    print("outputs wrong:", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
