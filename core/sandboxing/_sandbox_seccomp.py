"""The seccomp filter the sandbox server installs on itself and every command: Docker's default
profile, or stricter.

Docker's default profile is the bar because it is what containers that run untrusted code
widely meet, and its refusals are the kernel surface that has given container escapes.
Docker's is an allow-list; this is a deny-list of exactly what Docker's refuses to a container
without added capabilities (moby's ``profiles/seccomp/default.json``, v0.2.3), so programs
that run under Docker run here. Per group, with the answer a command gets:

- **Keyrings** (``add_key``, ``request_key``, ``keyctl``; EPERM): not namespaced. A key a
  command adds to its *user* keyring belongs to the sandbox uid, which the host leases again
  to later sandboxes, so it would outlive the episode; as root without a user namespace a
  sandbox would also inherit the host process's *session* keyring (Kerberos caches, PAM and
  systemd keys), and ``request_key`` can make the kernel run ``/sbin/request-key`` on the
  host. The server joins a fresh, empty session keyring before it installs the filter.
- **Namespaces** (EPERM): ``setns``; ``unshare`` with any flag but the ones that only give the
  caller private copies of its own state (CLONE_FILES, CLONE_FS, CLONE_SYSVSEM, and the
  thread flags); ``clone`` with any CLONE_NEW* flag (its flags are the first argument, the
  second on s390x). A new user namespace (``unshare -Ur``) makes a command root over its own
  namespaces and opens kernel code written for root - the usual first step of an exploit.
  ``clone3`` passes its flags in memory, which a filter cannot read: it gets ENOSYS, on which
  the C library (glibc >= 2.34 tries it first) falls back to ``clone``.
- **Mounts** (EPERM): ``mount``, ``umount``/``umount2``, ``pivot_root``, ``chroot`` and the new
  mount API (``fsopen``, ``fsconfig``, ``fsmount``, ``fspick``, ``open_tree``, ``move_mount``,
  ``mount_setattr``). Without capabilities the kernel refuses most of these anyway; refused
  here, a namespace obtained some other way does not make them reachable.
- **io_uring** (``io_uring_setup``/``enter``/``register``; ENOSYS, the answer of a kernel
  built without it, on which libuv/Node, liburing and runtimes fall back to epoll and
  threads): a large share of recent kernel privilege escalations.
- **Kernel interfaces with a record of exploits or a host-wide view** (EPERM): ``bpf``,
  ``perf_event_open``, ``userfaultfd`` (it makes a kernel race easy to win),
  ``fanotify_init``, ``lookup_dcookie``, ``open_by_handle_at`` (it opens any file of a mounted
  filesystem by handle, past the sandbox's mounts, given CAP_DAC_READ_SEARCH) and the
  ``lsm_*`` attribute calls.
- **Other processes** (EPERM): ``kcmp``, ``pidfd_getfd``, ``process_madvise``.
- **Memory policy** (EPERM; Docker allows them only with CAP_SYS_NICE): ``mbind``,
  ``set_mempolicy``, ``get_mempolicy``, ``set_mempolicy_home_node``, ``migrate_pages``,
  ``move_pages``. Runtimes that probe for NUMA (a JVM, libnuma) treat the refusal as "no NUMA".
- **The host** (EPERM): ``reboot``, ``kexec_load``/``kexec_file_load``, ``init_module``/
  ``finit_module``/``delete_module``, ``acct``, ``swapon``/``swapoff``, ``quotactl``/
  ``quotactl_fd``, ``syslog`` (the kernel log), ``vhangup``, ``sethostname``/``setdomainname``;
  **the clock**: ``settimeofday``, ``stime``, ``clock_settime(64)`` (``adjtimex`` and
  ``clock_adjtime`` stay, as in Docker: they only read unless the caller has CAP_SYS_TIME);
  **hardware**: ``iopl``, ``ioperm``, ``vm86``/``vm86old``, ``pciconfig_*`` and the
  architecture extras Docker leaves out (powerpc's ``rtas``, ``spu_*``, ``subpage_prot``,
  ``switch_endian``, ``multiplexer``, ``sys_debug_setcontext``; s390's
  ``s390_guarded_storage``, ``s390_sthyi``; ``arch_prctl`` of 32-bit x86 programs,
  ``modify_ldt`` of powerpc ones).
- **By argument** (EPERM): ``personality`` except the values Docker allows (0, PER_LINUX32,
  UNAME26, both, and 0xffffffff, the query): the other flags turn off address-space
  randomisation (``setarch -R``), make data executable or map page zero, all of which help
  an exploit. ``socket`` of AF_ALG (the kernel's crypto API, a recurring source of bugs) and
  AF_VSOCK, which no network namespace confines: on a virtual machine it reaches the host's
  services, past "no network but loopback". i386's ``socketcall`` passes ``socket``'s
  arguments in memory, out of a filter's sight, and any x86_64 program can make an i386 call
  (``int 0x80``): ``socketcall(SYS_SOCKET)`` gets ENOSYS there, and i386's direct ``socket``
  (Linux >= 4.3) is filtered as above. So a 32-bit x86 program whose C library creates
  sockets through ``socketcall`` gets none - rare on an x86_64 system, which seldom carries a
  32-bit C library. (Docker allows ``socketcall`` and leaves the two families to the LSM.)
- **Obsolete interfaces** (ENOSYS, what a kernel built without them answers; C libraries use
  their successors): ``ustat``, ``sysfs``, the 32-bit ``old*stat``/``olduname``/``readdir``/
  ``nice``/``signal``/``sigaction``/``sigpending``/``sigsuspend``/``sgetmask``/``ssetmask``,
  s390's first ``timerfd``; and those removed from Linux (``uselib``, ``_sysctl``,
  ``create_module``, ``get_kernel_syms``, ``query_module``, ``nfsservctl``, ``bdflush``) in
  case the kernel is old enough to have them.
- **Newer than Docker's profile** (ENOSYS): ``open_tree_attr``, ``file_getattr``,
  ``file_setattr``, ``listns``, ``rseq_slice_yield``, and every number above the newest in
  the table (:data:`NEWEST`) - so a syscall added to a later kernel is refused until it is
  reviewed here. Docker (runc) answers ENOSYS for syscalls newer than its profile too, which
  programs take as "not on this kernel" and fall back from.
- **Any ABI not in the table** (ENOSYS): each ABI's own numbering is covered - x86_64, x32,
  i386, aarch64, arm, riscv64, ppc64le, s390x -, so a compat ABI (i386 from x86_64, arm from
  aarch64) is no way around; a syscall through any other ABI this kernel may have is refused.

Allowed, as in Docker: ``ptrace``, ``process_vm_readv``/``writev`` (debuggers, ``strace``,
``py-spy``; since Linux 4.8 a tracer cannot use them to slip past a seccomp filter, and the
sandbox's processes can only trace each other: one uid, and the server is not dumpable),
``name_to_handle_at`` (it only reads a handle), ``modify_ldt`` (Wine). x86_64's ``uprobe``
(Docker does not list it) is allowed: it only works from the kernel's own uprobe trampolines,
and the kernel lets it and ``uretprobe`` past seccomp anyway. Where this filter is looser
than Docker's: ``unshare`` without namespace flags (Docker refuses every ``unshare``), and on
ppc64le and s390x ``socketcall`` is their own ABI's socket route, so it is left open there.

The program is classic BPF over ``struct seccomp_data``, built here on the host and handed to
the server in its configuration; the server installs it with ``prctl(PR_SET_SECCOMP)`` (its
standard-library-only code cannot build it cheaply). Per ABI it is a binary search over the
intervals of syscall numbers that share an answer: about ten comparisons per syscall whatever
the table's length. Conditional jumps reach only 255 instructions; a farther target is
reached through an unconditional jump (32-bit offset) placed after the comparison. Only
``clone``, ``unshare``, ``personality``, ``socket`` and ``socketcall`` read an argument; for every
other syscall the answer depends on the number alone, so Linux (>= 5.11) learns at install
time which syscalls the filter always allows and skips it for them: the filter costs the
syscalls it does not refuse next to nothing.

Syscall numbers are the kernel's own tables (``arch/x86/entry/syscalls/syscall_64.tbl`` and
``syscall_32.tbl``, ``scripts/syscall.tbl`` for aarch64 and riscv64,
``arch/arm/tools/syscall.tbl``, ``arch/powerpc/kernel/syscalls/syscall.tbl``,
``arch/s390/kernel/syscalls/syscall.tbl``, up to Linux 7.2's ``rseq_slice_yield``; the removed
ones from the last kernels that listed them); the tests check the x86 ones against the
machine's ``asm/unistd_*.h`` where those are installed.
"""

from __future__ import annotations

import errno
import functools
import platform
import struct
import sys
from types import MappingProxyType

#: The ABIs the table covers, in its column order.
ABIS = ("x86_64", "x32", "i386", "aarch64", "arm", "riscv64", "ppc64le", "s390x")
#: AUDIT_ARCH_* of each ABI (``seccomp_data.arch``); x32 shares x86_64's and sets this bit in
#: the syscall number instead (__X32_SYSCALL_BIT).
AUDIT_ARCH = MappingProxyType({
    "x86_64": 0xC000003E, "x32": 0xC000003E, "i386": 0x40000003, "aarch64": 0xC00000B7,
    "arm": 0x40000028, "riscv64": 0xC00000F3, "ppc64le": 0xC0000015, "s390x": 0x80000016,
})
X32_BIT = 0x40000000
#: The newest syscall number in the table (Linux 7.2's ``rseq_slice_yield``, the same on every
#: ABI here, x32's with its bit): anything above it is refused with ENOSYS, unless listed in
#: :data:`VALID_ABOVE_NEWEST`.
NEWEST = 471
#: Numbers above :data:`NEWEST` that are real syscalls: x32's own range (512-547, written
#: without the x32 bit) and ARM's private calls that programs need (0x0f0001 breakpoint,
#: 0x0f0002 cacheflush - JITs - and 0x0f0005 set_tls - the C library's thread pointer; the
#: other private calls, usr26, usr32 and get_tls, are refused with ENOSYS as in Docker).
VALID_ABOVE_NEWEST = MappingProxyType({
    "x32": ((512, 547),),
    "arm": ((0x0F0001, 0x0F0002), (0x0F0005, 0x0F0005)),
})

#: The numbers of the syscalls refused or checked by argument, one column per ABI ("-": the
#: ABI has no such syscall, or it is allowed there - see the group's comment; x32's numbers
#: without the x32 bit). The answer each gets: :data:`REFUSED`, :data:`BY_ARGUMENT`.
_TABLE = """
# syscall                 x86_64     x32    i386 aarch64     arm riscv64 ppc64le   s390x
# keyrings
add_key                      248     248     286     217     309     217     269     278
request_key                  249     249     287     218     310     218     270     279
keyctl                       250     250     288     219     311     219     271     280
# namespaces (clone and unshare: by their flags)
clone                         56      56     120     220     120     220     120     120
unshare                      272     272     310      97     337      97     282     303
setns                        308     308     346     268     375     268     350     339
clone3                       435     435     435     435     435     435     435     435
# mounts
mount                        165     165      21      40      21      40      21      21
umount                         -       -      22       -       -       -      22      22
umount2                      166     166      52      39      52      39      52      52
pivot_root                   155     155     217      41     218      41     203     217
chroot                       161     161      61      51      61      51      61      61
fsopen                       430     430     430     430     430     430     430     430
fsconfig                     431     431     431     431     431     431     431     431
fsmount                      432     432     432     432     432     432     432     432
fspick                       433     433     433     433     433     433     433     433
open_tree                    428     428     428     428     428     428     428     428
move_mount                   429     429     429     429     429     429     429     429
mount_setattr                442     442     442     442     442     442     442     442
# io_uring
io_uring_setup               425     425     425     425     425     425     425     425
io_uring_enter               426     426     426     426     426     426     426     426
io_uring_register            427     427     427     427     427     427     427     427
# kernel interfaces
bpf                          321     321     357     280     386     280     361     351
perf_event_open              298     298     336     241     364     241     319     331
userfaultfd                  323     323     374     282     388     282     364     355
fanotify_init                300     300     338     262     367     262     323     332
lookup_dcookie               212     212     253      18     249      18     235     110
open_by_handle_at            304     304     342     265     371     265     346     336
lsm_get_self_attr            459     459     459     459     459     459     459     459
lsm_set_self_attr            460     460     460     460     460     460     460     460
lsm_list_modules             461     461     461     461     461     461     461     461
# other processes
kcmp                         312     312     349     272     378     272     354     343
pidfd_getfd                  438     438     438     438     438     438     438     438
process_madvise              440     440     440     440     440     440     440     440
# memory policy
mbind                        237     237     274     235     319     235     259     268
set_mempolicy                238     238     276     237     321     237     261     270
get_mempolicy                239     239     275     236     320     236     260     269
set_mempolicy_home_node      450     450     450     450     450     450     450     450
migrate_pages                256     256     294     238     400     238     258     287
move_pages                   279     533     317     239     344     239     301     310
# the host
reboot                       169     169      88     142      88     142      88      88
kexec_load                   246     528     283     104     347     104     268     277
kexec_file_load              320     320       -     294     401     294     382     381
init_module                  175     175     128     105     128     105     128     128
finit_module                 313     313     350     273     379     273     353     344
delete_module                176     176     129     106     129     106     129     129
acct                         163     163      51      89      51      89      51      51
swapon                       167     167      87     224      87     224      87      87
swapoff                      168     168     115     225     115     225     115     115
quotactl                     179     179     131      60     131      60     131     131
quotactl_fd                  443     443     443     443     443     443     443     443
syslog                       103     103     103     116     103     116     103     103
vhangup                      153     153     111      58     111      58     111     111
sethostname                  170     170      74     161      74     161      74      74
setdomainname                171     171     121     162     121     162     121     121
# the clock
settimeofday                 164     164      79     170      79     170      79      79
stime                          -       -      25       -       -       -      25       -
clock_settime                227     227     264     112     262     112     245     259
clock_settime64                -       -     404       -     404       -       -       -
# hardware and architecture extras (arch_prctl, modify_ldt: only on the ABIs where Docker
# refuses them; x86 programs need them)
iopl                         172     172     110       -       -       -     110       -
ioperm                       173     173     101       -       -       -     101       -
pciconfig_iobase               -       -       -       -     271       -     200       -
pciconfig_read                 -       -       -       -     272       -     198       -
pciconfig_write                -       -       -       -     273       -     199       -
vm86                           -       -     166       -       -       -     113       -
vm86old                        -       -     113       -       -       -       -       -
rtas                           -       -       -       -       -       -     255       -
spu_create                     -       -       -       -       -       -     279       -
spu_run                        -       -       -       -       -       -     278       -
subpage_prot                   -       -       -       -       -       -     310       -
switch_endian                  -       -       -       -       -       -     363       -
sys_debug_setcontext           -       -       -       -       -       -     256       -
multiplexer                    -       -       -       -       -       -     201       -
s390_guarded_storage           -       -       -       -       -       -       -     378
s390_sthyi                     -       -       -       -       -       -       -     380
arch_prctl                     -       -     384       -       -       -       -       -
modify_ldt                     -       -       -       -       -       -     123       -
# by argument: personality, socket; socketcall (i386 only, see the docstring)
personality                  135     135     136      92     136      92     136     136
socket                        41      41     359     198     281     198     326     359
socketcall                     -       -     102       -       -       -       -       -
# obsolete interfaces
ustat                        136     136      62       -      62       -      62      62
sysfs                        139     139     135       -     135       -     135     135
nice                           -       -      34       -      34       -      34      34
oldstat                        -       -      18       -       -       -      18       -
oldfstat                       -       -      28       -       -       -      28       -
oldlstat                       -       -      84       -       -       -      84       -
olduname                       -       -     109       -       -       -     109       -
oldolduname                    -       -      59       -       -       -      59       -
readdir                        -       -      89       -       -       -      89      89
sgetmask                       -       -      68       -       -       -      68       -
ssetmask                       -       -      69       -       -       -      69       -
signal                         -       -      48       -       -       -      48      48
sigaction                      -       -      67       -      67       -      67      67
sigpending                     -       -      73       -      73       -      73      73
sigsuspend                     -       -      72       -      72       -      72      72
timerfd                        -       -       -       -       -       -       -     317
# removed from Linux
uselib                       134       -      86       -      86       -      86      86
_sysctl                      156       -     149       -     149       -     149     149
create_module                174       -     127       -       -       -     127     127
get_kernel_syms              177       -     130       -       -       -     130     130
query_module                 178       -     167       -       -       -     166     167
nfsservctl                   180       -     169      42     169      42     168     169
bdflush                        -       -     134       -     134       -     134     134
# newer than Docker's profile
open_tree_attr               467     467     467     467     467     467     467     467
file_getattr                 468     468     468     468     468     468     468     468
file_setattr                 469     469     469     469     469     469     469     469
listns                       470     470     470     470     470     470     470     470
rseq_slice_yield             471     471     471     471     471     471     471     471
"""


def _parse(table: str) -> dict[str, dict[str, int]]:
    numbers: dict[str, dict[str, int]] = {}
    for line in table.splitlines():
        if line.strip() and not line.startswith("#"):
            name, *columns = line.split()
            assert len(columns) == len(ABIS), name
            numbers[name] = {abi: int(column) for abi, column in zip(ABIS, columns, strict=True)
                             if column != "-"}
    return numbers


#: name -> {ABI: number} for every syscall the filter refuses or reads the arguments of.
SYSCALLS: MappingProxyType[str, dict[str, int]] = MappingProxyType(_parse(_TABLE))

EPERM, ENOSYS = errno.EPERM, errno.ENOSYS
#: The groups of :data:`SYSCALLS` refused outright, with the errno they get (see the module
#: docstring for why each is refused).
REFUSED: MappingProxyType[str, tuple[int, tuple[str, ...]]] = MappingProxyType({
    "keyrings": (EPERM, ("add_key", "request_key", "keyctl")),
    "namespaces": (EPERM, ("setns",)),
    "clone3": (ENOSYS, ("clone3",)),
    "mounts": (EPERM, ("mount", "umount", "umount2", "pivot_root", "chroot", "fsopen",
                       "fsconfig", "fsmount", "fspick", "open_tree", "move_mount",
                       "mount_setattr")),
    "io_uring": (ENOSYS, ("io_uring_setup", "io_uring_enter", "io_uring_register")),
    "kernel interfaces": (EPERM, ("bpf", "perf_event_open", "userfaultfd", "fanotify_init",
                                  "lookup_dcookie", "open_by_handle_at", "lsm_get_self_attr",
                                  "lsm_set_self_attr", "lsm_list_modules")),
    "other processes": (EPERM, ("kcmp", "pidfd_getfd", "process_madvise")),
    "memory policy": (EPERM, ("mbind", "set_mempolicy", "get_mempolicy",
                              "set_mempolicy_home_node", "migrate_pages", "move_pages")),
    "the host": (EPERM, ("reboot", "kexec_load", "kexec_file_load", "init_module",
                         "finit_module", "delete_module", "acct", "swapon", "swapoff",
                         "quotactl", "quotactl_fd", "syslog", "vhangup", "sethostname",
                         "setdomainname")),
    "the clock": (EPERM, ("settimeofday", "stime", "clock_settime", "clock_settime64")),
    "hardware": (EPERM, ("iopl", "ioperm", "pciconfig_iobase", "pciconfig_read",
                         "pciconfig_write", "vm86", "vm86old", "rtas", "spu_create", "spu_run",
                         "subpage_prot", "switch_endian", "sys_debug_setcontext",
                         "multiplexer", "s390_guarded_storage", "s390_sthyi", "arch_prctl",
                         "modify_ldt")),
    "obsolete": (ENOSYS, ("ustat", "sysfs", "nice", "oldstat", "oldfstat", "oldlstat",
                          "olduname", "oldolduname", "readdir", "sgetmask", "ssetmask",
                          "signal", "sigaction", "sigpending", "sigsuspend", "timerfd",
                          "uselib", "_sysctl", "create_module", "get_kernel_syms",
                          "query_module", "nfsservctl", "bdflush")),
    "newer than Docker's profile": (ENOSYS, ("open_tree_attr", "file_getattr", "file_setattr",
                                             "listns", "rseq_slice_yield")),
})
#: The syscalls whose answer depends on an argument (see :func:`_emit_check`).
BY_ARGUMENT = ("clone", "unshare", "personality", "socket", "socketcall")

#: CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
#: | CLONE_NEWNET: ``clone`` with any of them is refused (CLONE_NEWTIME exists only for
#: ``unshare`` and ``clone3``; ``clone``'s 32 flag bits are all taken, so none will be added).
CLONE_NAMESPACES = 0x7E020000
#: CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM: all that
#: ``unshare`` may be asked for. An allow-list, so a namespace flag added later is refused too.
UNSHARE_ALLOWED = 0x00050F00
#: ``personality`` values allowed, as in Docker: PER_LINUX, PER_LINUX32, UNAME26,
#: PER_LINUX32 | UNAME26, and 0xffffffff (only reads the current one).
PERSONALITY_ALLOWED = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
#: ``socket`` families refused: AF_ALG, AF_VSOCK.
SOCKET_REFUSED = (38, 40)
#: ``socketcall``'s call number for ``socket`` (SYS_SOCKET), refused on i386 (ENOSYS).
SYS_SOCKET = 1

#: ``keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)``: the server's own syscall number for it.
KEYCTL_JOIN_SESSION_KEYRING = 1
_NATIVE = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64",
           "riscv64": "riscv64", "ppc64le": "ppc64le", "s390x": "s390x"}


def _keyring_numbers(abi: str) -> tuple[int, int, int]:
    add_key, request_key, keyctl = (SYSCALLS[name][abi] | (X32_BIT if abi == "x32" else 0)
                                    for name in ("add_key", "request_key", "keyctl"))
    return add_key, request_key, keyctl


#: (AUDIT_ARCH_*, syscall numbers of add_key, request_key, keyctl) for each ABI.
KEYRING_SYSCALLS: dict[str, tuple[int, tuple[int, int, int]]] = {
    abi: (AUDIT_ARCH[abi], _keyring_numbers(abi)) for abi in ABIS}


def host_abi() -> str | None:
    """This machine's native ABI, or None for an architecture the table does not cover."""
    return _NATIVE.get(platform.machine().lower())


def native_keyctl() -> int | None:
    """This machine's ``keyctl`` syscall number, or None for an architecture not listed."""
    abi = host_abi()
    return None if abi is None else KEYRING_SYSCALLS[abi][1][2]


# Classic BPF (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP = 0x05  # BPF_JMP | BPF_JA
_JUMP_IF_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JUMP_IF_GREATER_OR_EQUAL = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JUMP_IF_ANY_BIT = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno
_MAX_INSTRUCTIONS = 4096  # BPF_MAXINSNS
_NR, _ARCH = 0, 4  # struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]


def _argument(index: int) -> int:
    """Offset of the low 32 bits of ``seccomp_data.args[index]`` (the kernel's byte order,
    which is this machine's: the filter is built where it runs)."""
    return 16 + 8 * index + (4 if sys.byteorder == "big" else 0)


def returns(errno_value: int) -> int:
    """The filter's return value for a syscall refused with ``errno_value``."""
    return _ERRNO | errno_value


class _Program:
    """Classic BPF with forward labels. A conditional jump's offsets are 8-bit: one whose
    target is farther goes through an unconditional jump (32-bit offset) placed right after
    it, decided at :meth:`assemble`."""

    def __init__(self) -> None:
        # (kind, code, k, if_true, if_false); kind "op", "goto" (target in if_true), "jump",
        # or "label" (its id in k). A target is a label id; None: the next instruction.
        self._items: list[tuple[str, int, int, int | None, int | None]] = []
        self._labels = 0

    def label(self) -> int:
        self._labels += 1
        return self._labels

    def place(self, label: int) -> None:
        self._items.append(("label", 0, label, None, None))

    def load(self, offset: int) -> None:
        self._items.append(("op", _LOAD_WORD, offset, None, None))

    def ret(self, value: int) -> None:
        self._items.append(("op", _RETURN, value, None, None))

    def goto(self, label: int) -> None:
        self._items.append(("goto", _JUMP, 0, label, None))

    def jump(self, code: int, k: int, if_true: int | None, if_false: int | None = None) -> None:
        """Jump to label ``if_true`` or ``if_false``; None: on to the next instruction."""
        self._items.append(("jump", code, k, if_true, if_false))

    def _size(self, index: int, far: set[tuple[int, int]]) -> int:
        """Instructions item ``index`` takes: none for a label, one more per far target."""
        return 0 if self._items[index][0] == "label" else (
            1 + ((index, 0) in far) + ((index, 1) in far))

    def _layout(self, far: set[tuple[int, int]]) -> tuple[list[int], dict[int, int]]:
        """Each item's address, and each label's."""
        starts, where, pc = [], {}, 0
        for index, (kind, _, k, _, _) in enumerate(self._items):
            starts.append(pc)
            if kind == "label":
                where[k] = pc
            pc += self._size(index, far)
        return starts, where

    def assemble(self) -> bytes:
        far: set[tuple[int, int]] = set()  # (item, 0: if_true / 1: if_false) through a goto
        while True:  # each pass only adds gotos, which only lengthens jumps: it ends
            starts, where = self._layout(far)
            too_far = {(index, side) for index, item in enumerate(self._items)
                       if item[0] == "jump"
                       for side, target in enumerate(item[3:5])
                       if target is not None and where[target] - (starts[index] + 1) > 255}
            if too_far <= far:
                break
            far |= too_far
        out: list[tuple[int, int, int, int]] = []  # (code, k, if_true, if_false)
        for index, (kind, code, k, if_true, if_false) in enumerate(self._items):
            if kind == "op":
                out.append((code, k, 0, 0))
            elif kind == "goto":
                assert if_true is not None
                out.append((_JUMP, where[if_true] - (len(out) + 1), 0, 0))
            elif kind == "jump":
                pc = len(out)
                via = [side for side in (0, 1) if (index, side) in far]
                offsets = []
                for side, target in enumerate((if_true, if_false)):
                    if side in via:  # to its goto, right after this instruction
                        offsets.append(via.index(side))
                    elif target is None:  # the next instruction, past the gotos
                        offsets.append(len(via))
                    else:
                        offsets.append(where[target] - (pc + 1))
                out.append((code, k, offsets[0], offsets[1]))
                for side in via:
                    target = (if_true, if_false)[side]
                    assert target is not None
                    out.append((_JUMP, where[target] - (len(out) + 1), 0, 0))
        if len(out) > _MAX_INSTRUCTIONS:
            raise ValueError(f"seccomp filter of {len(out)} instructions, over the kernel's "
                             f"{_MAX_INSTRUCTIONS}")
        for code, k, if_true, if_false in out:
            if not (0 <= if_true <= 255 and 0 <= if_false <= 255) or (code == _JUMP and k < 0):
                raise AssertionError("seccomp filter: a jump out of range")  # a bug here
        return b"".join(struct.pack("=HBBI", code, if_true, if_false, k & 0xFFFFFFFF)
                        for code, k, if_true, if_false in out)


def _answer(name: str, abi: str) -> str:
    """What ``name`` gets on ``abi``: "eperm", "enosys" or the argument check to run."""
    if name == "clone":
        return "clone_arg1" if abi == "s390x" else "clone_arg0"  # s390's clone(stack, flags)
    if name in BY_ARGUMENT:
        return name
    for answer, names in REFUSED.values():
        if name in names:
            return "eperm" if answer == EPERM else "enosys"
    raise KeyError(f"{name} is in the table but in no group")


def intervals(arch: int) -> list[tuple[int, str]]:
    """The filter's answer by syscall number for AUDIT_ARCH ``arch``: (first number, answer)
    in order, each answer holding up to the next first number ("allow", "eperm", "enosys" or
    an argument check)."""
    specific: dict[int, str] = {}
    valid: list[tuple[int, int]] = []
    for abi in (abi for abi in ABIS if AUDIT_ARCH[abi] == arch):
        base = X32_BIT if abi == "x32" else 0
        for name, numbers in SYSCALLS.items():
            if abi in numbers:
                specific[base + numbers[abi]] = _answer(name, abi)
        valid += [(base + low, base + high)
                  for low, high in ((0, NEWEST), *VALID_ABOVE_NEWEST.get(abi, ()))]
    points = {0} | set(specific) | {n + 1 for n in specific}
    points |= {low for low, _ in valid} | {high + 1 for _, high in valid}
    out: list[tuple[int, str]] = []
    for point in sorted(p for p in points if p <= 0xFFFFFFFF):
        answer = specific.get(point) or (
            "allow" if any(low <= point <= high for low, high in valid) else "enosys")
        if not out or out[-1][1] != answer:
            out.append((point, answer))
    return out


def _emit_search(program: _Program, spans: list[tuple[int, str]], checks: dict[str, int]) -> None:
    """Binary search over ``spans`` (the number is loaded): one JGE per level, then the answer."""
    if len(spans) == 1:
        answer = spans[0][1]
        if answer in checks:
            program.goto(checks[answer])
        else:
            program.ret({"allow": ALLOW, "eperm": returns(EPERM),
                         "enosys": returns(ENOSYS)}[answer])
        return
    middle = len(spans) // 2
    upper = program.label()
    program.jump(_JUMP_IF_GREATER_OR_EQUAL, spans[middle][0], upper)
    _emit_search(program, spans[:middle], checks)
    program.place(upper)
    _emit_search(program, spans[middle:], checks)


def _emit_check(program: _Program, check: str) -> None:
    """The argument check ``check``: load the argument's low 32 bits (all the kernel reads of
    clone's and unshare's flags, personality's value and socket's family), answer."""
    refuse = program.label()
    if check in ("clone_arg0", "clone_arg1"):
        program.load(_argument(int(check[-1])))
        program.jump(_JUMP_IF_ANY_BIT, CLONE_NAMESPACES, refuse)
        program.ret(ALLOW)
    elif check == "unshare":
        program.load(_argument(0))
        program.jump(_JUMP_IF_ANY_BIT, ~UNSHARE_ALLOWED & 0xFFFFFFFF, refuse)
        program.ret(ALLOW)
    elif check == "personality":
        allow = program.label()
        program.load(_argument(0))
        for value in PERSONALITY_ALLOWED:
            program.jump(_JUMP_IF_EQUAL, value, allow)
        program.goto(refuse)
        program.place(allow)
        program.ret(ALLOW)
    elif check == "socket":
        program.load(_argument(0))
        for family in SOCKET_REFUSED:
            program.jump(_JUMP_IF_EQUAL, family, refuse)
        program.ret(ALLOW)
    elif check == "socketcall":
        program.load(_argument(0))
        program.jump(_JUMP_IF_EQUAL, SYS_SOCKET, refuse)
        program.ret(ALLOW)
        program.place(refuse)
        program.ret(returns(ENOSYS))
        return
    else:
        raise KeyError(check)
    program.place(refuse)
    program.ret(returns(EPERM))


def seccomp_filter(native: str | None = None) -> bytes:
    """The filter program (an array of ``struct sock_filter``) for a machine whose native ABI
    is ``native`` (default: this one's; it is tested first, then its 32-bit companion)."""
    native = native or host_abi() or ABIS[0]
    arches = sorted(set(AUDIT_ARCH.values()), key=lambda arch: (
        arch != AUDIT_ARCH[native], arch & 0x80000000 == 0, arch))  # native, 64-bit, 32-bit
    program = _Program()
    blocks = {arch: program.label() for arch in arches}
    checks = {check: program.label() for check in (
        "clone_arg0", "clone_arg1", "unshare", "personality", "socket", "socketcall")}
    program.load(_ARCH)
    for arch in arches:
        program.jump(_JUMP_IF_EQUAL, arch, blocks[arch])
    program.ret(returns(ENOSYS))  # an ABI the table does not cover
    for arch in arches:
        program.place(blocks[arch])
        program.load(_NR)
        _emit_search(program, intervals(arch), checks)
    for check, label in checks.items():
        program.place(label)
        _emit_check(program, check)
    return program.assemble()


@functools.cache
def sandbox_filter() -> bytes | None:
    """The filter for this machine (built once, ~4 ms), or None where its architecture is not
    in the table (the server then refuses to start: it would run without the isolation it
    promises)."""
    return None if host_abi() is None else seccomp_filter()
