"""The seccomp filter the sandbox server installs on itself and every command: no kernel keyrings.

Why: keyrings are not namespaced. A key a command adds to its *user* keyring belongs to the
sandbox uid, which the host leases again to later sandboxes, so it outlives the episode (and
the process) and the next episode on that uid can read it; as root without a user namespace a
sandbox would also inherit the host process's *session* keyring (Kerberos caches, PAM and
systemd keys). ``request_key`` can even make the kernel run ``/sbin/request-key`` on the host.
Agents' commands have no use for keyrings, so ``add_key``, ``request_key`` and ``keyctl``
fail with EPERM, whatever the ABI they are called through (64-bit, 32-bit compat, x32).
The server also joins a fresh, empty session keyring before it installs the filter, so the
host's keys are not even listed in ``/proc/keys``.

The program is classic BPF over ``struct seccomp_data`` (``nr`` at offset 0, ``arch`` at 4),
built here on the host and handed to the server in its configuration; the server installs it
with ``prctl(PR_SET_SECCOMP)`` (its standard-library-only code cannot build it cheaply).
"""

from __future__ import annotations

import errno
import platform
import struct

# BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_IF_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_FAIL = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO
_NR, _ARCH = 0, 4
_X32_BIT = 0x40000000

#: (AUDIT_ARCH_*, syscall numbers of add_key, request_key, keyctl) for each ABI a Linux
#: process on these machines can call the kernel through.
KEYRING_SYSCALLS: dict[str, tuple[int, tuple[int, int, int]]] = {
    "x86_64": (0xC000003E, (248, 249, 250)),
    "x32": (0xC000003E, (_X32_BIT | 248, _X32_BIT | 249, _X32_BIT | 250)),
    "i386": (0x40000003, (286, 287, 288)),
    "aarch64": (0xC00000B7, (217, 218, 219)),
    "arm": (0x40000028, (309, 310, 311)),
    "riscv64": (0xC00000F3, (217, 218, 219)),
    "ppc64le": (0xC0000015, (269, 270, 271)),
    "s390x": (0x80000016, (278, 279, 280)),
}

#: ``keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)``: the server's own syscall number for it.
KEYCTL_JOIN_SESSION_KEYRING = 1
_NATIVE = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64",
           "riscv64": "riscv64", "ppc64le": "ppc64le", "s390x": "s390x"}


def native_keyctl() -> int | None:
    """This machine's ``keyctl`` syscall number, or None for an architecture not listed."""
    abi = _NATIVE.get(platform.machine().lower())
    return None if abi is None else KEYRING_SYSCALLS[abi][1][2]


def _instruction(code: int, k: int, if_true: int = 0, if_false: int = 0) -> bytes:
    return struct.pack("=HBBI", code, if_true, if_false, k)


def no_keyrings_filter() -> bytes:
    """The filter program (an array of ``struct sock_filter``): EPERM for the keyring syscalls
    of every ABI in :data:`KEYRING_SYSCALLS`, everything else allowed."""
    by_arch: dict[int, list[int]] = {}
    for arch, numbers in KEYRING_SYSCALLS.values():
        by_arch.setdefault(arch, []).extend(numbers)
    # Layout per arch: "arch == A ? next : skip block", "load nr", one "nr == n ? fail" per
    # number, "allow". The program ends with "allow" (other arches) and "fail" (the target).
    program: list[tuple[int, int, int, int]] = [(_LOAD_WORD, _ARCH, 0, 0)]
    fail_jumps: list[int] = []  # compares whose "true" jump goes to "fail", patched below
    for arch, arch_numbers in by_arch.items():
        block_len = 1 + len(arch_numbers) + 1  # load, compares, allow
        program.append((_JUMP_IF_EQUAL, arch, 0, block_len))
        program.append((_LOAD_WORD, _NR, 0, 0))
        for number in arch_numbers:
            fail_jumps.append(len(program))
            program.append((_JUMP_IF_EQUAL, number, 0, 0))
        program.append((_RETURN, _ALLOW, 0, 0))
    program.append((_RETURN, _ALLOW, 0, 0))
    fail_at = len(program)
    program.append((_RETURN, _FAIL, 0, 0))
    for index in fail_jumps:
        code, k, _, if_false = program[index]
        distance = fail_at - index - 1
        if distance > 255:  # BPF jumps are 8-bit; the table above is far from that
            raise ValueError("seccomp filter too long for 8-bit jumps")
        program[index] = (code, k, distance, if_false)
    return b"".join(_instruction(code, k, jt, jf) for code, k, jt, jf in program)
