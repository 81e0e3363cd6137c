"""How each language's program is built and run in the sandbox: one table, `LANGUAGES`.

Every language is compiled (or, for JavaScript, syntax-checked) once per response by the
request's build step, under `CodeConfig.build_cpu_s` and the same memory limits, separate from the
test budget; a build that fails scores 0 with the compiler's message in `details.error`. Then each
stdio test is one execution of the built program. The toolchains are Debian 12's packages
(`sandboxes/images/packages.txt`): `g++`, `default-jdk-headless` (OpenJDK 17), `nodejs` (18),
`golang-go` (1.19) and `rustc` (1.63).

What differs per language, and why:

- Java: `javac` then `java` with a serial GC, one JIT compiler thread, client-level JIT (a
  cheaper start-up, paid once per test; see benchmarks/HISTORY.md) and the heap capped at the
  spec's memory limit.
  The JVM reserves address space it never touches (code cache, class space, a malloc arena per
  thread), so its RLIMIT_AS is the memory limit plus `RESERVE_BYTES`; its resident memory is
  still bounded by the memory limit, through the supervisor's poll (and docker's cgroup). The
  class run is the public class, else the class that declares `main`, else `Main`; the source
  file is named after the public class, as javac requires.
- JavaScript: `node --check` as the build (a syntax error is a compile error), then `node` with
  the old-space heap capped at the memory limit; RLIMIT_AS as for Java (V8 reserves its code
  range and heap cage up front).
- Go: `go build` of the one file (the standard library only; the build cache lives in the run's
  work directory and is gone after the request); RLIMIT_AS and stack as for Java (the Go runtime
  reserves its page summaries up front).
- Rust: `rustc -O --edition 2021`, linked by the system `cc`; RLIMIT_AS and stack as for Java
  (rustc starts worker threads; a Rust program's main thread gets 8 MiB of stack, as on Linux).

Time and memory bounds are the spec's for every language; a JVM's start-up is part of the test
budget, as the interpreter's start-up is for Python.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "LANGUAGES",
    "RESERVE_BYTES",
    "THREAD_STACK_BYTES",
    "Build",
    "Toolchain",
    "java_names",
    "missing_toolchains",
]

RESERVE_BYTES = 1024 * 1024 * 1024
"""Address space granted beyond the memory limit to runtimes that reserve more than they use."""

_MiB = 1024 * 1024
THREAD_STACK_BYTES = 8 * _MiB
"""RLIMIT_STACK of the runtimes that start threads of their own, as a new thread's stack is
sized by it (the supervisor's default, 256 MiB, would cost each thread that much address
space); their programs' own stacks are set by the runtime (`-Xss`, V8's, Go's growable)."""


@dataclass(frozen=True, slots=True)
class Build:
    """The files, build and run command lines of one program."""

    source_file: str
    build: tuple[str, ...] | None
    run: tuple[str, ...]
    address_space_bytes: int | None = None
    stack_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Toolchain:
    """How a language is built and run, given the program and the memory limit in bytes."""

    plan: Callable[[bytes, int, tuple[str, ...]], Build]
    version_argv: tuple[str, ...]
    """What prints the toolchain's version (the environment digest records it)."""
    package: str
    """The Debian package that provides it."""


_PUBLIC_CLASS = re.compile(
    rb"\bpublic\s+(?:(?:final|abstract|strictfp)\s+)*class\s+([A-Za-z_$][\w$]*)"
)
_CLASS = re.compile(rb"\bclass\s+([A-Za-z_$][\w$]*)")
_MAIN = re.compile(rb"\bstatic\s+(?:final\s+)?(?:public\s+)?void\s+main\s*\(")


def java_names(code: bytes) -> tuple[str, str]:
    """The source file's name and the class to run: the public class, else the last class
    declared before the first `static void main`, else `Main`."""
    public = _PUBLIC_CLASS.search(code)
    if public is not None:
        name = public.group(1).decode("ascii")
        return f"{name}.java", name
    main = _MAIN.search(code)
    before = _CLASS.findall(code[: main.start()]) if main is not None else []
    name = before[-1].decode("ascii") if before else "Main"
    return f"{name}.java", name


_JVM = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:CICompilerCount=1",
    "-XX:ReservedCodeCacheSize=64m",
    "-XX:CompressedClassSpaceSize=64m",
    "-XX:MaxMetaspaceSize=192m",
    "-XX:-UsePerfData",
    "-Xshare:auto",
)


def _cpp(code: bytes, memory: int, flags: tuple[str, ...]) -> Build:
    return Build("main.cpp", ("g++", *flags, "-o", "main", "main.cpp"), ("./main",))


def _java(code: bytes, memory: int, flags: tuple[str, ...]) -> Build:
    source, main = java_names(code)
    heap = f"-Xmx{memory // _MiB}m"
    javac = ("javac", *(f"-J{o}" for o in (*_JVM, "-Xmx256m")), "-encoding", "UTF-8", source)
    run = ("java", *_JVM, heap, "-cp", ".", main)
    return Build(source, javac, run, memory + RESERVE_BYTES, THREAD_STACK_BYTES)


def _javascript(code: bytes, memory: int, flags: tuple[str, ...]) -> Build:
    heap = f"--max-old-space-size={memory // _MiB}"
    run = ("node", heap, "main.js")
    check = ("node", "--check", "main.js")
    return Build("main.js", check, run, memory + RESERVE_BYTES, THREAD_STACK_BYTES)


def _go(code: bytes, memory: int, flags: tuple[str, ...]) -> Build:
    build = ("go", "build", "-o", "main", "main.go")
    return Build("main.go", build, ("./main",), memory + RESERVE_BYTES, THREAD_STACK_BYTES)


def _rust(code: bytes, memory: int, flags: tuple[str, ...]) -> Build:
    rustc = ("rustc", "-O", "--edition", "2021", "-o", "main", "main.rs")
    # rustc's own worker threads: the address space and thread stacks of the JVM's case
    return Build("main.rs", rustc, ("./main",), memory + RESERVE_BYTES, THREAD_STACK_BYTES)


LANGUAGES: dict[str, Toolchain] = {
    "cpp": Toolchain(_cpp, ("g++", "--version"), "g++"),
    "java": Toolchain(_java, ("javac", "-version"), "default-jdk-headless"),
    "javascript": Toolchain(_javascript, ("node", "--version"), "nodejs"),
    "go": Toolchain(_go, ("go", "version"), "golang-go"),
    "rust": Toolchain(_rust, ("rustc", "--version"), "rustc"),
}
"""The compiled languages (Python is run by the interpreter, its syntax checked outside)."""

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
"""PATH of the sandbox's programs; under `local` these are the host's (the jail sees /usr)."""


def missing_toolchains() -> dict[str, str]:
    """Languages whose compiler this host lacks where the `local` sandbox looks for it, with
    the Debian package that provides it (their answers would be `infra_error` under `local`)."""
    return {
        language: tool.package
        for language, tool in LANGUAGES.items()
        if shutil.which(tool.version_argv[0], path=SANDBOX_PATH) is None
    }
