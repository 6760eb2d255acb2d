"""Linux: confine this process with Landlock (files, TCP) and a seccomp filter (sockets).

A small ctypes layer over three syscalls, not a binding from PyPI: the bindings there are
young (dev releases or 0.x from the last year, few users), each would be one more runtime
dependency for ~100 lines, and the launcher that calls this must start fast and import
nothing it does not need. The numbers are the generic syscall table's (x86_64 and aarch64
share them): landlock_create_ruleset 444, landlock_add_rule 445, landlock_restrict_self 446.

What Landlock can and cannot say, and how the policy is fitted to it:

- It is an allow-list: a right granted on a directory holds for everything beneath it, and
  nothing beneath can take it back. So a folder that must stay read-only inside a writable
  one (``.git`` in the workspace) is, when it exists and user namespaces are allowed, bound
  read-only onto itself in a mount namespace of the command's own (``_read_only_binds``),
  and the workspace is granted whole. Without user namespaces it is kept out by granting
  write on each of its siblings instead of on the parent, walking down to it (``_grant``);
  the directories on the way get read rights only. The cost, then: in such a directory
  (the workspace root) a command cannot create, delete or rename entries; it can rewrite
  the files already there, and do anything in the folders below. A protected path that
  does not exist (the ``.git`` of a workspace that is not a repository) cannot be bound,
  and walking around it would cost every such workspace its root's entries: it is not
  protected, and a command there can create a ``.git`` (as one can a ``sub/.git``
  anywhere); git run by a later command ignores its fsmonitor and hooks
  (``support.GIT_SETTINGS``). The same walk hides paths inside a readable folder
  (``/etc/shadow``; a tool prefix's ``credentials.toml``).
- Symlinks met on that walk get no rule (a rule on one would land on its target).
- TCP bind/connect are denied from ABI 4; other sockets (UDP, unix sockets: a Docker or
  ssh-agent socket) are not Landlock's, so a seccomp filter refuses ``socket()`` for every
  family but netlink (and ``io_uring_setup``, which could make sockets past it).
  ``socketpair`` stays allowed: pipes between a command's own processes. A user and
  network namespace would cover UDP too, but not unix sockets bound to a path, and it
  changes what a command sees of uids and widens the kernel surface it can reach; the
  filter covers both without it.
- From ABI 6, signals and abstract unix sockets are scoped to the sandbox: a command
  cannot signal the app.

Every step fails closed: a right the policy needs that cannot be enforced raises
``SandboxError`` and the launcher does not run the command.
"""

from __future__ import annotations

import ctypes
import os
import platform
import stat
import struct
from collections.abc import Iterable

from hermes_tui.util.errors import AppError

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2

# Filesystem rights, by the ABI that brought them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK
         | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM | REFER | TRUNCATE | IOCTL_DEV)
# The rights a rule on a file (not a directory) may carry; others make add_rule fail.
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

# Devices every command may read and write (output thrown away, random bytes); nothing else
# under /dev (a disk, as root, would be the whole machine).
DEVICES_RW = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


class SandboxError(AppError, OSError):
    """The policy cannot be enforced here; the command must not run. ``errno`` is the
    system call's error (0 where a feature is missing)."""

    def __init__(self, errno: int, reason: str) -> None:
        super().__init__(f"[Errno {errno}] {reason}" if errno else reason)
        self.errno, self.strerror = errno, reason  # as OSError's own


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int


def _syscall(number: int, *args: object) -> int:
    result: int = _libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise SandboxError(err, os.strerror(err))
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI (0: none: an old kernel, or Landlock not enabled)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64", "arm64"):
        return 0
    try:
        return _syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except SandboxError:
        return 0  # ENOSYS (no Landlock in the kernel) or EOPNOTSUPP (disabled at boot)


def fs_rights(abi: int) -> int:
    """Every filesystem right this ABI knows: all handled, so none is left unrestricted."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def seccomp_supported() -> bool:
    """Whether this kernel filters syscalls (``Seccomp:`` in /proc/self/status)."""
    try:
        with open("/proc/self/status") as f:
            return any(line.startswith("Seccomp:") for line in f)
    except OSError:
        return False


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class _Ruleset:
    def __init__(self, abi: int, network: bool) -> None:
        self.abi = abi
        self.handled = fs_rights(abi)
        net = 0 if network or abi < 4 else NET_BIND_TCP | NET_CONNECT_TCP
        scoped = 0 if abi < 6 else SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        # The whole struct (three u64) whatever the ABI: a kernel that knows fewer fields
        # accepts a larger struct as long as the fields it does not know are zero.
        attr = ctypes.create_string_buffer(struct.pack("=QQQ", self.handled, net, scoped))
        self.fd = _syscall(SYS_CREATE_RULESET, attr, ctypes.c_size_t(24), ctypes.c_uint32(0))

    def add(self, path: str, rights: int) -> None:
        """Grant ``rights`` on ``path`` (and all beneath it, for a directory)."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # missing (or unreachable): nothing to grant
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                rights &= FILE_RIGHTS
            rights &= self.handled
            if not rights:
                return
            attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))  # packed: 12 bytes
            _syscall(SYS_ADD_RULE, ctypes.c_int(self.fd), ctypes.c_int(RULE_PATH_BENEATH), attr, ctypes.c_uint32(0))
        finally:
            os.close(fd)

    def restrict(self) -> None:
        _syscall(SYS_RESTRICT_SELF, ctypes.c_int(self.fd), ctypes.c_uint32(0))
        os.close(self.fd)


def _grant(ruleset: _Ruleset, path: str, rights: int, excluded: Iterable[str], floor: int) -> None:
    """``rights`` on ``path`` except on the ``excluded`` paths beneath it: a directory that
    holds one gets only ``floor`` and its entries are granted one by one."""
    inner = [e for e in excluded if _inside(e, path)]
    if not inner:
        ruleset.add(path, rights)
        return
    if path in inner:
        return
    if floor:
        ruleset.add(path, floor)
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        if entry.is_symlink():
            continue  # a rule on a symlink lands on its target, which may be anywhere
        _grant(ruleset, entry.path, rights, inner, floor)


def confine(*, read: list[str], write: list[str], protected: list[str], hidden: list[str],
            network: bool, **_: object) -> int:
    """Confine this process (and what it execs) to the policy; the Landlock ABI used.

    ``read``: readable and executable; ``write``: readable and writable, but the
    ``protected`` paths in them stay read-only; ``hidden`` paths inside ``read`` folders are
    not readable at all; ``network``: whether sockets are allowed."""
    abi = abi_version()
    if abi < 1:
        raise SandboxError(0, "Landlock is not available in this kernel")
    if not network and not seccomp_supported():
        raise SandboxError(0, "seccomp is not available: sockets cannot be denied")
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # needed by both, and no setuid way out
        raise SandboxError(ctypes.get_errno(), "cannot set no_new_privs")
    # Protected paths are made read-only by a bind mount where user namespaces allow it, so
    # the folder around them stays wholly writable; else the walk keeps them out, which
    # costs their parent its entries. One that does not exist (the .git of a workspace that
    # is not a repository) is neither: keeping it from being created would cost the
    # workspace root its entries in every such workspace (no `touch x`, no `cargo init`).
    protected = [p for p in protected if os.path.lexists(p) and any(_inside(p, w) for w in write)]
    if protected and _read_only_binds(protected):
        protected = []
    ruleset = _Ruleset(abi, network)
    for path in read:
        _grant(ruleset, path, READ, hidden, READ_DIR)
    for path in DEVICES_RW:
        ruleset.add(path, READ_FILE | WRITE_FILE)
    for path in write:
        _grant(ruleset, path, READ | WRITE, [*protected, *hidden], 0)
    ruleset.restrict()
    if not network:
        _deny_sockets()
    return abi


# --- read-only bind mounts -------------------------------------------------------------

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
# statvfs flags -> the mount flags a remount must keep (a user namespace may not drop them).
_KEEP_FLAGS = {os.ST_NOSUID: 2, os.ST_NODEV: 4, os.ST_NOEXEC: 8, os.ST_NOATIME: 1024,
               os.ST_NODIRATIME: 2048, os.ST_RELATIME: 1 << 21}


def _mount(source: str | None, target: str, flags: int) -> None:
    if _libc.mount(source and source.encode(), target.encode(), None, ctypes.c_ulong(flags), None) != 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"mount {target}: {os.strerror(err)}")


def _read_only_binds(paths: list[str]) -> bool:
    """Make ``paths`` read-only for this process and its children: a new user and mount
    namespace (the user's own uid and gid mapped to themselves, so ownership reads the same
    for their files; other owners show as nobody), each path bound onto itself read-only.
    False where user namespaces are not allowed, or a mount fails (nothing is then relied
    on: the caller keeps those paths out with Landlock rules). Undoing a mount later is not
    possible: Landlock refuses mount and umount to a confined process."""
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(ctypes.c_int(CLONE_NEWUSER | CLONE_NEWNS)) != 0:
        return False
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        _mount(None, "/", MS_REC | MS_PRIVATE)  # nothing done here reaches the app's namespace
        for path in paths:
            _mount(path, path, MS_BIND | MS_REC)
            kept = os.statvfs(path).f_flag
            flags = sum(flag for st, flag in _KEEP_FLAGS.items() if kept & st)
            _mount(None, path, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
    except OSError:
        return False
    return True


# --- seccomp ----------------------------------------------------------------------------

_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198), "arm64": (0xC00000B7, 198)}
_IO_URING_SETUP = 425
_AF_NETLINK = 16
_X32_BIT = 0x40000000
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | 1
_LD_ABS_W, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06


def _deny_sockets() -> None:
    """A seccomp filter: ``socket()`` of any family but netlink fails with EPERM, as does
    ``io_uring_setup``; syscalls of another ABI (32-bit, x32) fail too."""
    machine = platform.machine()
    if machine not in _ARCH:
        raise SandboxError(0, f"no seccomp filter for {machine}")
    arch, socket_nr = _ARCH[machine]
    # (code, jt, jf, k); a jump of n goes to the instruction n after the next one.
    program = [
        (_LD_ABS_W, 0, 0, 4),  # 0: arch
        (_JEQ, 0, 8, arch),  # 1: another ABI -> deny (10)
        (_LD_ABS_W, 0, 0, 0),  # 2: syscall number
        (_JGE, 6, 0, _X32_BIT),  # 3: x32 -> deny (10)
        (_JEQ, 0, 2, socket_nr),  # 4: socket? else -> 7
        (_LD_ABS_W, 0, 0, 16),  # 5: args[0], the family (low 32 bits)
        (_JEQ, 2, 3, _AF_NETLINK),  # 6: netlink -> allow (9), else deny (10)
        (_JEQ, 2, 0, _IO_URING_SETUP),  # 7: io_uring_setup -> deny (10)
        (_RET, 0, 0, _RET_ALLOW),  # 8: anything else
        (_RET, 0, 0, _RET_ALLOW),  # 9: a netlink socket
        (_RET, 0, 0, _RET_EPERM),  # 10
    ]
    raw = b"".join(struct.pack("=HBBI", *insn) for insn in program)
    filters = ctypes.create_string_buffer(raw)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(program), ctypes.addressof(filters))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"cannot install the seccomp filter: {os.strerror(err)}")
