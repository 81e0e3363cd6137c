"""The seccomp filter the supervisor installs on itself (`kernel.install_filter`): classic BPF
refusing the kernel surface no solution needs, for the architectures in `SECCOMP_ARCHES`. Built on
the host (`config.supervisor_config`) and sent to the jail as bytes; this module is not sent."""

from __future__ import annotations

import errno
import struct

SECCOMP_ARCHES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
"""The architectures the seccomp filter knows (uname machine: AUDIT_ARCH_*); on any other
nothing is installed."""

SYSCALL_NUMBERS: dict[str, tuple[int | None, int | None]] = {
    # name: (x86_64, aarch64), in SECCOMP_ARCHES' order; None where the architecture has none.
    # Checked by argument: namespace flags, AF_VSOCK, personality values other than Docker's.
    "clone": (56, 220),
    "socket": (41, 198),
    "personality": (135, 92),
    # ENOSYS, so that the C library falls back to clone (whose flags a filter can read)
    "clone3": (435, 435),
    # EPERM from here on. New namespaces.
    "unshare": (272, 97),
    "setns": (308, 268),
    # io_uring
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    # mounts and file systems
    "mount": (165, 40),
    "umount2": (166, 39),
    "mount_setattr": (442, 442),
    "open_tree": (428, 428),
    "open_tree_attr": (467, 467),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "open_by_handle_at": (304, 265),
    "fanotify_init": (300, 262),
    "lookup_dcookie": (212, 18),
    "ustat": (136, None),
    "sysfs": (139, None),
    "uselib": (134, None),
    "_sysctl": (156, None),
    # kernel objects and introspection that exploits build on
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "kcmp": (312, 272),
    "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440),
    "syslog": (103, 116),
    # kernel keyrings: a key outlives its process, in a keyring per uid
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    # the machine's administration
    "reboot": (169, 142),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "acct": (163, 89),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "vhangup": (153, 58),
    "iopl": (172, None),
    "ioperm": (173, None),
    # NUMA memory policy
    "mbind": (237, 235),
    "set_mempolicy": (238, 237),
    "get_mempolicy": (239, 236),
    "migrate_pages": (256, 238),
    "move_pages": (279, 239),
    "set_mempolicy_home_node": (450, 450),
}
"""Every system call the filter looks at; the README's "System calls" section says why each."""

ARG_CHECKED = ("clone", "socket", "personality")
NOT_IMPLEMENTED = ("clone3",)
REFUSED = tuple(name for name in SYSCALL_NUMBERS if name not in ARG_CHECKED + NOT_IMPLEMENTED)
LAST_REVIEWED_SYSCALL = 469
"""The highest system call number reviewed (file_setattr, Linux 6.17; the numbering has been
shared by both architectures since 424). Later ones fail with ENOSYS, as on an older kernel."""

_CLONE_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS, NEWCGROUP, NEWUTS, IPC, USER, PID, NET
_AF_VSOCK = 40
_PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)  # Docker's: PER_LINUX(32), UNAME26, query
_SECCOMP_MODE_FILTER = 2
_LD_W_ABS, _JEQ, _JGE, _JGT, _JSET, _RET = 0x20, 0x15, 0x35, 0x25, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO (| errno)
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg 0: its low 32 bits)


_Insn = tuple[int, int | str, int | str, int]
"""(opcode, jump if true, jump if false, k): a jump is an offset or the name of a label."""


def _assemble(items: list[_Insn | str]) -> bytes:
    """Classic BPF from instructions whose jump offsets may name a label (a str item)."""
    labels: dict[str, int] = {}
    insns: list[_Insn] = []
    for item in items:
        if isinstance(item, str):
            labels[item] = len(insns)
        else:
            insns.append(item)
    code = b""
    for i, (op, jt, jf, k) in enumerate(insns):
        jumps = [labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= j < 256 for j in jumps):
            raise ValueError(f"seccomp jump out of range at instruction {i}")
        code += struct.pack("HBBI", op, jumps[0], jumps[1], k)
    return code


def syscall_numbers(machine: str) -> dict[str, int]:
    """The numbers of `SYSCALL_NUMBERS` on `machine` (one of `SECCOMP_ARCHES`), by name."""
    column = list(SECCOMP_ARCHES).index(machine)
    found: dict[str, int] = {}
    for name, numbers in SYSCALL_NUMBERS.items():
        number = numbers[column]
        if number is not None:
            found[name] = number
    return found


def seccomp_program(machine: str) -> bytes | None:
    """The filter for `machine` (installed by `kernel.install_filter`), None for an unknown one.

    Only `clone`, `socket` and `personality` read an argument, so the kernel can decide every
    other call from its number alone, once, when the filter is installed (its seccomp cache)."""
    arch = SECCOMP_ARCHES.get(machine)
    if arch is None:
        return None
    nr = syscall_numbers(machine)
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    items: list[_Insn | str] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ, 0, "eperm", arch),  # another ABI (i386, arm32)
        (_LD_W_ABS, 0, 0, _NR),
        (_JGE, "eperm", 0, 0x40000000),  # x32
        (_JGT, "enosys", 0, LAST_REVIEWED_SYSCALL),
        *((_JEQ, name, 0, nr[name]) for name in ARG_CHECKED),  # to the label of that name
        *((_JEQ, "enosys", 0, nr[name]) for name in NOT_IMPLEMENTED),
        *((_JEQ, "eperm", 0, nr[name]) for name in REFUSED if name in nr),
        (_RET, 0, 0, _ALLOW),
        "clone",
        (_LD_W_ABS, 0, 0, _ARG0),
        (_JSET, "eperm", 0, _CLONE_NAMESPACE_FLAGS),
        (_RET, 0, 0, _ALLOW),
        "socket",
        (_LD_W_ABS, 0, 0, _ARG0),
        (_JEQ, "eperm", 0, _AF_VSOCK),
        (_RET, 0, 0, _ALLOW),
        "personality",
        (_LD_W_ABS, 0, 0, _ARG0),
        *((_JEQ, "allowed", 0, value) for value in _PERSONALITIES),
        (_RET, 0, 0, eperm),
        "allowed",
        (_RET, 0, 0, _ALLOW),
        "eperm",
        (_RET, 0, 0, eperm),
        "enosys",
        (_RET, 0, 0, enosys),
    ]
    return _assemble(items)
