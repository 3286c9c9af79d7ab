"""The sandbox's seccomp filter, as the raw classic-BPF program `bwrap --seccomp FD` loads before it starts Python.

Written by hand (no libseccomp binding is installed for the interpreter the worker runs) and kept small: the
architecture must be the one the table was written for (anything else is killed, so a 32-bit or x32 syscall
cannot slip past under another number), and the listed calls fail with EPERM. Everything else is allowed; the
namespaces, read-only mounts and rlimits bound what is left.

Why these calls: no new processes or threads (fork, vfork, clone, clone3: a fork bomb gets EPERM at its first
fork, whatever uid the worker runs as, which RLIMIT_NPROC alone cannot promise for root), no sockets at all
(there is no network in the namespace either), and nothing that changes mounts, namespaces, kernel state or
other processes' memory, so a `ctypes` call to libc's `syscall()` meets the same wall as Python's own modules.
"""
from __future__ import annotations

import errno
import platform
import struct

# struct seccomp_data: int nr; __u32 arch; ...
_NR_OFFSET, _ARCH_OFFSET = 0, 4
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_EPERM = 0x00050000 | errno.EPERM
_X32_BIT = 0x40000000  # x86-64's x32 ABI numbers: refused as a block

# Names → numbers per architecture (asm/unistd_64.h and asm-generic/unistd.h; aarch64 has no fork/vfork).
_DENIED = ("fork", "vfork", "clone", "clone3", "socket", "socketpair", "connect", "bind", "listen", "accept",
           "accept4", "ptrace", "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "kexec_load",
           "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf", "perf_event_open", "keyctl",
           "add_key", "request_key", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
           "process_vm_readv", "process_vm_writev", "personality", "open_tree", "move_mount", "fsopen",
           "fsconfig", "fsmount", "fspick", "mount_setattr")
_X86_64 = dict(zip(_DENIED, (57, 58, 56, 435, 41, 53, 42, 49, 50, 43, 288, 101, 165, 166, 155, 161, 272, 308, 246,
                             320, 175, 313, 176, 321, 298, 250, 248, 249, 323, 425, 426, 427, 310, 311, 135, 428,
                             429, 430, 431, 432, 433, 442)))
_AARCH64 = dict(zip(_DENIED[2:], (220, 435, 198, 199, 203, 200, 201, 202, 242, 117, 40, 39, 41, 51, 97, 268, 104,
                                  294, 105, 273, 106, 280, 241, 219, 217, 218, 282, 425, 426, 427, 270, 271, 92,
                                  428, 429, 430, 431, 432, 433, 442)))
ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, _X86_64),  # AUDIT_ARCH_X86_64
    "aarch64": (0xC00000B7, _AARCH64),  # AUDIT_ARCH_AARCH64
}


class UnsupportedArchitecture(RuntimeError):
    pass


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def denied_numbers(machine: str | None = None) -> dict[str, int]:
    return dict(ARCHES[_machine(machine)][1])


def _machine(machine: str | None) -> str:
    name = (machine or platform.machine()).lower()
    name = {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)
    if name not in ARCHES:
        raise UnsupportedArchitecture(f"no seccomp table for {name}: the sandbox does not run here")
    return name


def program(machine: str | None = None) -> bytes:
    """The filter for `machine` (this one's by default): a sock_filter array, as bwrap reads it."""
    name = _machine(machine)
    audit_arch, table = ARCHES[name]
    numbers = sorted(set(table.values()))
    prologue = [_insn(_LD_W_ABS, _ARCH_OFFSET), _insn(_JEQ_K, audit_arch, jt=1), _insn(_RET_K, _RET_KILL_PROCESS),
                _insn(_LD_W_ABS, _NR_OFFSET)]
    checks: list[tuple[int, int]] = []  # (opcode, k) jumping to the EPERM return when true
    if name == "x86_64":
        checks.append((_JGE_K, _X32_BIT))
    checks += [(_JEQ_K, nr) for nr in numbers]
    body = []
    for i, (code, k) in enumerate(checks):
        to_eperm = len(checks) - i  # skip the remaining checks and the ALLOW return
        if to_eperm > 255:
            raise ValueError("seccomp filter too long for 8-bit jumps")
        body.append(_insn(code, k, jt=to_eperm))
    epilogue = [_insn(_RET_K, _RET_ALLOW), _insn(_RET_K, _RET_EPERM)]
    return b"".join(prologue + body + epilogue)
