"""What the shell classifier knows about commands, as data.

Names here are normalised (``/bin/rm`` and ``\\rm`` are ``rm``; ``python3.11``
is ``python``). Anything not listed is an unknown command, rated medium.
"""

from __future__ import annotations

import re


def words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (long tables read better this way)."""
    return frozenset(text.split())


LOW = words(
    """
    ls ll dir vdir cat head tail wc grep egrep fgrep rg ag ack pwd echo printf date cal
    whoami id groups uname hostname df du free uptime ps pgrep pstree top htop which whereis
    type file stat sort uniq cut tr diff cmp comm less more tree basename dirname realpath
    readlink nl od xxd hexdump strings md5sum sha1sum sha256sum sha512sum cksum b2sum
    base32 base64 jq yq column fold fmt paste join expand unexpand rev tac seq true false
    test [ [[ sleep printenv locale lsb_release lscpu lsblk lsusb lspci lsmod nproc getconf
    arch tty vcgencmd sensors dmesg journalctl cd pushd popd dirs set unset shift read wait
    exit return local hash umask history : help man info whatis apropos look iconv numfmt
    factor expr bc units pinout i2cdetect w who last users env
    """
)
"""Read-only commands: they show things and change nothing (their paths are still judged)."""

NAMES_ONLY = frozenset(
    {"echo", "printf", "which", "whereis", "type", "hash", "help", "man", ":", "test", "[", "[["}
    | {"basename", "dirname"}
)
"""Commands whose arguments are only names or checks: a path there is mentioned, not read."""

MEDIUM: dict[str, str] = {
    **dict.fromkeys(("mv", "cp", "install", "rsync", "rename"), "moves or copies files"),
    **dict.fromkeys(("mkdir", "touch", "mkfifo", "mktemp", "rmdir", "unlink"), "changes files"),
    **dict.fromkeys(("ln", "truncate"), "changes files"),
    **dict.fromkeys(("tar", "zip", "unzip", "gzip", "gunzip", "xz", "unxz"), "writes archives"),
    **dict.fromkeys(("bzip2", "bunzip2", "zstd", "7z", "patch"), "writes files"),
    **dict.fromkeys(("curl", "wget", "ping", "dig", "host", "nslookup"), "uses the network"),
    **dict.fromkeys(("traceroute", "ftp", "telnet", "scp", "sftp"), "uses the network"),
    **dict.fromkeys(("kill", "pkill", "killall"), "stops processes"),
    **dict.fromkeys(("make", "cmake", "ninja", "just", "gcc", "cc", "g++", "clang"), "builds"),
    **dict.fromkeys(("npx", "pytest", "tox", "nox", "ruff", "mypy", "black"), "runs tools"),
    "ssh": "connects to another machine",
    **dict.fromkeys(("tmux", "screen"), "starts a session that keeps running afterwards"),
    "setsid": "starts a process in a session of its own",
    "nc": "opens a network connection",
    "netcat": "opens a network connection",
    "ncat": "opens a network connection",
    "socat": "opens a network connection",
    "tee": "writes files",
    "sed": "edits text",
    "awk": "runs an awk program",
    "git": "changes the git repository",
    "xdg-open": "opens a program",
    "notify-send": "shows a notification",
}
"""Commands with side effects that stay within reach: a person approves them."""

HIGH: dict[str, str] = {
    "dd": "dd writes raw data and can overwrite whole disks",
    **dict.fromkeys(
        ("mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "parted", "gdisk", "wipefs"),
        "formats or partitions disks",
    ),
    **dict.fromkeys(("swapon", "swapoff", "losetup", "cryptsetup"), "changes disks"),
    **dict.fromkeys(("sudo", "su", "doas", "pkexec", "runuser"), "runs as another user"),
    **dict.fromkeys(("chmod", "chown", "chgrp", "chattr", "setfacl"), "changes permissions"),
    **dict.fromkeys(
        ("shutdown", "reboot", "halt", "poweroff", "init", "telinit", "kexec"),
        "shuts down or restarts the machine",
    ),
    **dict.fromkeys(("mount", "umount"), "mounts or unmounts file systems"),
    **dict.fromkeys(
        ("iptables", "ip6tables", "nft", "ufw", "firewall-cmd"), "changes the firewall"
    ),
    **dict.fromkeys(("insmod", "rmmod", "modprobe"), "loads or unloads kernel modules"),
    **dict.fromkeys(
        ("useradd", "userdel", "usermod", "groupadd", "passwd", "chpasswd", "visudo"),
        "changes user accounts",
    ),
    **dict.fromkeys(("at", "batch"), "schedules commands to run later"),
    "shred": "shred destroys file contents beyond recovery",
    "eval": "eval runs text that is only put together when it runs",
    "killall5": "signals every process",
    "sysctl": "changes kernel settings",
    "nsenter": "enters other processes' namespaces",
    "chroot": "runs a command in another root directory",
    "systemd-run": "runs a command as a system service",
    "start-stop-daemon": "starts or stops system services",
}
"""Commands that can do lasting or wide harm: blocked unless autonomy is ``full``."""

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})

INTERPRETERS: dict[str, tuple[str, str, str]] = {
    # name: (language, option letters that take inline code, option letters taking a value)
    "python": ("Python", "c", "WXm"),
    "node": ("JavaScript", "ep", "r"),
    "deno": ("JavaScript", "", ""),
    "bun": ("JavaScript", "e", ""),
    "perl": ("Perl", "eE", "MmIx"),
    "ruby": ("Ruby", "e", "Ir"),
    "php": ("PHP", "rBRE", "dcz"),
    "lua": ("Lua", "e", "l"),
    "Rscript": ("R", "e", ""),
    "osascript": ("AppleScript", "e", ""),
    "pwsh": ("PowerShell", "cC", ""),
}
INLINE_LONG = frozenset({"--eval", "--print", "--command", "-Command", "eval"})
VERSION_FLAGS = frozenset({"--version", "-V", "--help", "-h"})

WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    # name: (options that take a value, positional words before the command)
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "ionice": (frozenset({"-c", "-n", "--class", "--classdata"}), 0),
    "setsid": (frozenset(), 0),
    "unshare": (frozenset({"--map-user", "--map-group", "-S", "-G", "--setuid"}), 0),
    "strace": (frozenset({"-o", "-e", "-p", "-s", "-u", "-E", "-P"}), 0),
    "ltrace": (frozenset({"-o", "-e", "-p", "-s", "-u"}), 0),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "flock": (frozenset({"-w", "--timeout", "-E"}), 1),
    "busybox": (frozenset(), 0),
    "unbuffer": (frozenset(), 0),
    "nocorrect": (frozenset(), 0),
    "noglob": (frozenset(), 0),
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "pkexec": (frozenset({"--user"}), 0),
    "runuser": (frozenset({"-u", "-g", "-G", "--user", "--group"}), 0),
    "chroot": (frozenset({"--userspec", "--groups"}), 1),
    "nsenter": (frozenset({"-t", "--target"}), 0),
}
"""Commands that run another command: the inner one is what gets classified."""

PACKAGE_MANAGERS = words(
    """
    pip pipx uv poetry conda mamba npm yarn pnpm bun gem bundle cargo go apt apt-get aptitude
    dnf yum zypper pacman apk brew snap flatpak composer
    """
)
PACKAGE_READS = words(
    """
    list ls show search freeze info view outdated help version config check why doctor env
    doc vet fmt policy depends rdepends -V --version -h --help
    """
)

GIT_READS = words(
    """
    status log diff show blame grep ls-files ls-tree rev-parse rev-list describe
    shortlog whatchanged cat-file show-ref show-branch reflog count-objects help version
    var check-ignore name-rev merge-base
    """
)
GIT_LISTS = frozenset({"branch", "tag", "remote", "stash", "config", "worktree", "submodule"})
GIT_LIST_FLAGS = frozenset(
    {"-l", "--list", "-v", "-vv", "-a", "-r", "--all", "--get", "--get-all", "--show-current"}
)
GIT_RUNS_PROGRAMS = re.compile(
    r"^(alias\.|core\.(pager|editor|sshcommand|fsmonitor|hookspath|gitproxy)|"
    r"diff\..*\.(command|textconv)|filter\.|credential\.helper|sequence\.editor|pager\.)",
    re.IGNORECASE,
)
"""git settings whose value is a program git will run."""

DANGEROUS_VARS = words(
    """
    PATH LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT BASH_ENV ENV IFS PROMPT_COMMAND SHELLOPTS
    BASHOPTS PYTHONPATH PYTHONSTARTUP PYTHONHOME NODE_OPTIONS PERL5OPT PERL5LIB RUBYOPT
    GIT_SSH_COMMAND GIT_EXTERNAL_DIFF GIT_PAGER GIT_EDITOR GIT_CONFIG_PARAMETERS
    GIT_EXEC_PATH PAGER EDITOR VISUAL LESSOPEN MANPAGER CDPATH GCONV_PATH GETCONF_DIR
    LUA_INIT LUA_INIT_5_2 LUA_INIT_5_3 LUA_INIT_5_4
    """
)
"""Variables that change which program or code later commands run."""

SAFE_DEVICES = words(
    """
    /dev/null /dev/zero /dev/random /dev/urandom /dev/full /dev/stdin /dev/stdout
    /dev/stderr /dev/tty
    """
)
BLOCK_DEVICE = re.compile(r"^/dev/(sd|hd|vd|xvd|nvme|mmcblk|loop|md|dm-|mapper/|disk/|sr)")
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
REMOTE = re.compile(r"^[\w.@-]+:(?!//)")  # scp/rsync ``host:path``
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)$", re.S)

_NAME_FORMS = (
    (re.compile(r"^(python|pypy)[0-9.]*$"), "python"),
    (re.compile(r"^pip[0-9.]*$"), "pip"),
    (re.compile(r"^nodejs$"), "node"),
    (re.compile(r"^perl[0-9.]*$"), "perl"),
    (re.compile(r"^ruby[0-9.]*$"), "ruby"),
    (re.compile(r"^php[0-9.]*$"), "php"),
    (re.compile(r"^lua[0-9.]*$"), "lua"),
    (re.compile(r"^(g|m|n|busybox-?)awk$"), "awk"),
    (re.compile(r"^mkfs(\..+)?$"), "mkfs"),
    (re.compile(r"^(gsed)$"), "sed"),
    (re.compile(r"^(ncat|nc\..+)$"), "nc"),
)


def normalise(name: str) -> str:
    """The table name for a command word: its last path part, version suffixes dropped."""
    base = name.rsplit("/", 1)[-1] if "/" in name.rstrip("/") else name
    for pattern, canonical in _NAME_FORMS:
        if pattern.match(base):
            return canonical
    return base


RUNS_CODE_OPTIONS: dict[str, frozenset[str]] = {
    "tar": frozenset({"--to-command", "--checkpoint-action", "--use-compress-program", "-I"}),
    "zip": frozenset({"-TT", "--unzip-command"}),
    "rsync": frozenset({"-e", "--rsh", "--rsync-path"}),
    **dict.fromkeys(("vim", "vi", "nvim", "view", "ex"), frozenset({"-c", "--cmd", "-S", "+"})),
    "emacs": frozenset({"--eval", "-f", "--funcall", "-l", "--load"}),
    "man": frozenset({"-P", "--pager", "-H", "--html"}),
    "gdb": frozenset({"-ex", "--ex", "-x", "--command", "-batch"}),
    "tcpdump": frozenset({"-z"}),
    "hash": frozenset({"-p"}),
    "enable": frozenset({"-f"}),
    "script": frozenset({"-c", "--command"}),
    "sort": frozenset({"--compress-program"}),
    "rg": frozenset({"--pre"}),
    "ag": frozenset({"--pager"}),
    "ack": frozenset({"--pager"}),
}
"""Options that make an otherwise ordinary program run another program or code."""
