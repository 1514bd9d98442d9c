"""Hostile lines for trust on a default install (issue 26), and everyday lines, as data.

Each hostile line is a ``Probe``: a shell command line, the category it belongs
to, and the name of the workspace set-up it needs (``SETUPS``: a shell script
run with plain git and Python in the probe's own folder before the line, the
way a hostile archive, clone or one approved write would leave it). The
harness is ``tests/test_trust_probes.py``.

Placeholders, filled in by the tests (braces meant for the shell or a program
are doubled):

- ``{out}``: a file outside the workspace a hostile line or payload tries to create;
- ``{home}``: the fake home, holding canary credentials, ``.bashrc`` and ``.profile``;
- ``{data}``: PinClaw's data folder (config, ``pinclaw.env``, database);
- ``{ws}``: the probe's own folder in the workspace (where the command runs);
- ``{port}``: a local service on 127.0.0.1 (another process) counting connections;
- ``{ownport}``: a port PinClaw itself listens on (in the daemon's process, on every
  address), counting connections;
- ``{hostip}`` and ``{hostname}``: this machine's own non-loopback address and name;
- ``{mark}``: a number unique to the call, used as a ``sleep`` length, so a
  process it left behind can be found in ``/proc``;
- ``{daemonpid}``: the daemon stand-in (its environment held a canary under a
  name the config does not know, and it sealed itself as PinClaw does);
- ``{neighbourpid}``: another process of the same user whose environment holds a
  canary (not sealed: other processes are off limits, whatever they hold).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Probe:
    """One hostile line, what it needs, and what the harness does around it."""

    category: str
    line: str
    setup: str = ""
    """A key of ``SETUPS``, run in the probe's folder first ("" for none)."""
    reads: tuple[str, ...] = ()
    """Files (in the probe's folder) the file tools try to read afterwards."""
    harmless: str = ""
    """Why this line may run unasked at ``supervised`` ("" means: it must not)."""
    timeout_s: int | None = None
    """The call's own time limit, for lines that run until they are stopped."""
    confined: bool = False
    """It runs code from the workspace: in the sandbox that may run unasked (README: low risk
    there by design, it can change the workspace and nothing else); without it, it asks."""
    covered: bool = False
    """It reads a hard link to a forbidden file planted in the workspace: the sandbox covers
    the link, so there the line may run and reads nothing; without it no command runs."""


# -- set-ups ---------------------------------------------------------------------------------

REPO = r"""git init -q
printf 'first line\nsecond line TODO\n' > notes.txt
printf 'name,count\npi,3\n' > data.csv
git add -A
git commit -qm first
"""
"""A repository with one ordinary commit."""

PAYLOAD = r"""cat > .payload <<'EOF'
#!/bin/sh
echo pwned >> {out}
cat {home}/.ssh/id_rsa
exit 0
EOF
chmod +x .payload
"""
"""The program a hostile setting names: it leaves a marker outside and shows the SSH key."""

PY_PAYLOAD = """import os
try:
    open('{out}', 'a').write('pwned')
    print(open('{home}/.ssh/id_rsa').read())
except OSError:
    pass
"""


def python_file(path: str) -> str:
    """Set-up lines writing ``PY_PAYLOAD`` to ``path`` (its folders made)."""
    folder = path.rpartition("/")[0]
    make = f"mkdir -p {folder}\n" if folder else ""
    return f"{make}cat > {path} <<'EOF'\n{PY_PAYLOAD}EOF\n"


SHELL_PAYLOAD = "echo pwned >> {out}; cat {home}/.ssh/id_rsa"
TEXTCONV = "echo '*.txt diff=notes' > .gitattributes\ngit config diff.notes.textconv ./.payload\n"
CHANGED = "echo third line >> notes.txt\n"
TOUCHED = "touch -d 2001-01-01 notes.txt\n"  # the index is stale: git refreshes (and writes) it
HOME_INDEX = (
    r"""mkdir .ssh
echo placeholder > .ssh/id_rsa
echo placeholder > .git-credentials
"""
    + REPO
    + "rm -r .ssh .git-credentials\n"
)
"""An index tracking ``.ssh/id_rsa`` and ``.git-credentials``, files that are not there."""
MISSING_BLOB = r"""blob=$(git rev-parse HEAD:notes.txt)
rm .git/objects/$(echo "$blob" | cut -c1-2)/$(echo "$blob" | cut -c3-)
git config core.repositoryformatversion 1
git config extensions.partialClone origin
git config remote.origin.promisor true
"""
"""A partial clone missing a blob: reading it makes git fetch it from ``origin``."""
SIGNED = r"""cat > .sign <<'EOF'
#!/bin/sh
cat > /dev/null
echo '[GNUPG:] SIG_CREATED ' >&2
printf '%s\n' '-----BEGIN PGP SIGNATURE-----' '' 'iQEzBAABCAAdFiEE' '-----END PGP SIGNATURE-----'
EOF
chmod +x .sign
echo signed >> notes.txt
git -c gpg.program=./.sign commit -qS -am signed
rm .sign
git config gpg.program ./.payload
"""
"""A signed commit; checking its signature runs ``gpg.program``."""
PICKLE = """python3 - <<'EOF'
import os, pickle
class Payload:
    def __reduce__(self):
        return (os.system, ("echo pwned >> {out}; cat {home}/.ssh/id_rsa",))
open("data.pkl", "wb").write(pickle.dumps(Payload()))
EOF
"""
TAR_LINK = """python3 - <<'EOF'
import tarfile
with tarfile.open("links.tar", "w") as tar:
    member = tarfile.TarInfo("key2.txt")
    member.type = tarfile.LNKTYPE
    member.linkname = "{home}/.ssh/id_rsa"
    tar.addfile(member)
EOF
"""
"""An archive whose one member is a hard link to the SSH key (an absolute link target)."""

SETUPS: dict[str, str] = {
    # git: hooks, which git runs while reading (post-index-change: git status writes the index).
    "hook": REPO + PAYLOAD + "cp .payload .git/hooks/post-index-change\n" + TOUCHED,
    "hooks-path": REPO
    + PAYLOAD
    + "mkdir .githooks\ncp .payload .githooks/post-index-change\n"
    + "git config core.hooksPath .githooks\n"
    + TOUCHED,
    # git: settings naming a program, in the repository's config or a file it includes.
    "fsmonitor": REPO + PAYLOAD + "git config core.fsmonitor ./.payload\n",
    "fsmonitor-included": REPO
    + PAYLOAD
    + "printf '[core]\\n\\tfsmonitor = ./.payload\\n' > .editorconfig.ini\n"
    + "git config include.path ../.editorconfig.ini\n",
    "fsmonitor-includeif": REPO
    + PAYLOAD
    + "mkdir .github\nprintf '[core]\\n\\tfsmonitor = ./.payload\\n' > .github/git.cfg\n"
    + "git config 'includeIf.gitdir:/.path' ../.github/git.cfg\n",
    "textconv": REPO + PAYLOAD + TEXTCONV + CHANGED,
    "textconv-info": REPO
    + PAYLOAD
    + "echo '*.txt diff=notes' > .git/info/attributes\n"
    + "git config diff.notes.textconv ./.payload\n",
    "diff-command": REPO
    + PAYLOAD
    + "echo '*.txt diff=notes' > .gitattributes\ngit config diff.notes.command ./.payload\n"
    + CHANGED,
    "external": REPO + PAYLOAD + "git config diff.external ./.payload\n" + CHANGED,
    "filter": REPO
    + PAYLOAD
    + "echo '*.txt filter=crlf' > .gitattributes\ngit config filter.crlf.clean ./.payload\n"
    + TOUCHED,
    "filter-process": REPO
    + PAYLOAD
    + "echo '*.txt filter=crlf' > .gitattributes\ngit config filter.crlf.process ./.payload\n"
    + TOUCHED,
    "alias": REPO
    + PAYLOAD
    + "git config alias.lg '!./.payload'\ngit config alias.last '!sh .payload'\n",
    "pager": REPO + PAYLOAD + "git config core.pager ./.payload\n",
    "man-viewer": REPO
    + PAYLOAD
    + "git config man.viewer notes\ngit config man.notes.cmd ./.payload\n",
    "gpg": REPO + PAYLOAD + SIGNED,
    "log-signature": REPO + PAYLOAD + SIGNED + "git config log.showSignature true\n",
    # git: a partial clone fetching a missing object through a program the settings name.
    "lazy-ssh": REPO
    + PAYLOAD
    + MISSING_BLOB
    + "git config remote.origin.url ssh://git.example.com/notes.git\n"
    + "git config core.sshCommand ./.payload\n",
    "lazy-uploadpack": REPO
    + PAYLOAD
    + MISSING_BLOB
    + "git config remote.origin.url {ws}/upstream\n"
    + "git config remote.origin.uploadpack {ws}/.payload\n",
    # git: the repository is somewhere else than it looks, or its work tree is the home.
    "worktree-home": HOME_INDEX + "git config core.worktree {home}\n",
    "worktree-relative": HOME_INDEX + "git config core.worktree ../../../..\n",
    "include-home": REPO + "git config include.path {home}/.gitconfig\n",
    "include-home-tilde": REPO + "git config include.path '~/.gitconfig'\n",
    "ignore-revs": REPO + "git config blame.ignoreRevsFile {home}/.git-credentials\n",
    "ignore-revs-tilde": REPO + "git config blame.ignoreRevsFile '~/.git-credentials'\n",
    "gitfile": "mkdir .cache\necho .cache/ > .gitignore\n"
    "git init -q --separate-git-dir .cache/store\n"
    + REPO.removeprefix("git init -q\n")
    + PAYLOAD
    + TEXTCONV,
    "nested": "mkdir -p vendor/lib\ncd vendor/lib\n" + REPO + PAYLOAD + TEXTCONV,
    "bare": "mkdir origin\ncd origin\n"
    + REPO
    + "cd ..\ngit clone -q --bare origin assets.git\nrm -rf origin\n"
    + PAYLOAD
    + "echo '*.txt diff=notes' > assets.git/info/attributes\n"
    + "git -C assets.git config diff.notes.textconv {ws}/.payload\n",
    "submodule": PAYLOAD
    + r"""mkdir sub
cd sub
git init -q
printf 'one\n' > notes.txt
git add -A
git commit -qm sub
echo '*.txt diff=notes' > .gitattributes
git config diff.notes.textconv {ws}/.payload
git config core.fsmonitor {ws}/.payload
cp ../.payload .git/hooks/post-index-change
echo two >> notes.txt
cd ..
git init -q
printf 'top\n' > top.txt
git add -A 2>/dev/null
git commit -qm top
""",
    "git-path": REPO + "mkdir bin\n" + PAYLOAD + "mv .payload bin/git\n",
    # Python: the current folder comes first on the module path, and files it reads run code.
    # (py-user-site: a virtual environment's Python has no user site; the system's has.)
    "py-shadow": python_file("json.py") + "echo '{{\"a\": 1}}' > data.json\n",
    "py-shadow-package": python_file("json/__init__.py") + "echo '{{\"a\": 1}}' > data.json\n",
    "py-shadow-indirect": python_file("getopt.py") + "echo hello > notes.txt\n",
    "py-shadow-subfolder": python_file("src/json.py") + "echo '{{\"a\": 1}}' > data.json\n",
    "py-user-site": "d=$(PYTHONUSERBASE=. /usr/bin/python3 -c "
    "'import site; print(site.getusersitepackages())')\nmkdir -p $d\n"
    "echo \"import os; os.system('echo pwned >> {out}; cat {home}/.ssh/id_rsa')\" > $d/notes.pth\n"
    "echo '{{\"a\": 1}}' > data.json\n",
    "py-doctest": "cat > README.txt <<'EOF'\nUsage:\n\n"
    '    >>> import os; os.system("echo pwned >> {out}; cat {home}/.ssh/id_rsa")\n'
    "    0\nEOF\n",
    "py-pickle": PICKLE,
    "py-unittest": python_file("tests/test_smoke.py"),
    "py-profile": python_file("tools/job.py"),
    "py-main": python_file("__main__.py"),
    "py-zipapp": python_file("app/__main__.py") + "python3 -m zipapp app -o tool.pyz\nrm -r app\n",
    # Other everyday tools reading code from the folder.
    "dotenv": "echo 'GREETING=\"$(" + SHELL_PAYLOAD + ")\"' > .env\n",
    "venv": "mkdir -p .venv/bin\necho '" + SHELL_PAYLOAD + "' > .venv/bin/activate\n",
    "make": "printf 'VERSION := $(shell " + SHELL_PAYLOAD + ")\\nall:\\n\\t@echo $(VERSION)\\n'"
    " > Makefile\n",
    "sed-script": "echo '1e " + SHELL_PAYLOAD + "' > fix.sed\necho hello > notes.txt\n",
    "awk-script": "echo 'BEGIN {{ system(\"" + SHELL_PAYLOAD + "\") }}' > count.awk\n"
    "printf 'a,1\\n' > data.csv\n",
    "perl-check": "echo 'BEGIN {{ system(\"" + SHELL_PAYLOAD + "\") }}' > check.pl\n",
    "node-test": "mkdir test\necho \"require('child_process').execSync('"
    + SHELL_PAYLOAD
    + "', {{stdio: 'inherit'}})\" > test/smoke.test.js\n",
    # For the other categories.
    "daemon": r"""cat > daemon.py <<'EOF'
import os, sys, time
if os.fork():  # the classic daemon: fork, a session of its own, fork again
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
time.sleep(float(sys.argv[1]))
EOF
""",
    "environ-script": r"""cat > environ.py <<'EOF'
import os
for pid in os.listdir('/proc'):
    try:
        print(pid, open(f'/proc/{{pid}}/environ', 'rb').read())
    except OSError:
        pass
EOF
""",
    "rc-file": "echo 'touch {out}' > profile.sh\n",
    "repo": REPO,
    "where": "echo {home}/.ssh/id_rsa > where.txt\n",
    "tar-link": TAR_LINK,
    "planted": "ln {home}/.ssh/id_rsa deploy_key.txt\nln {data}/pinclaw.env settings.env\n"
    "ln -s {home}/.netrc netrc.txt\n",
}
"""Each probe's folder as it was left by an archive, a clone or one approved write."""


# -- 1. reading commands that run code the workspace names -----------------------------------

NEUTRALISED = (
    "unasked, git runs with hooks, fsmonitor, gpg, pagers and transports switched off "
    "(bot/security/shell/neutral.py) and refuses a bare repository it was not pointed at; "
    "checked: no marker, no canary"
)


def code(setup: str, line: str, harmless: str = "") -> Probe:
    """A workspace-code probe: ``line`` in a folder left as ``setup`` makes it."""
    return Probe("workspace-code", line, setup, harmless=harmless, confined=True)


WORKSPACE_CODE: list[Probe] = [
    code("hook", "git status --short", NEUTRALISED),
    code("hook", "git status -sb", NEUTRALISED),
    code("hooks-path", "git status --porcelain", NEUTRALISED),
    code("fsmonitor", "git status --untracked-files=no", NEUTRALISED),
    code("fsmonitor", "git ls-files -m", NEUTRALISED),
    code("fsmonitor", "git diff --name-only", NEUTRALISED),
    code("fsmonitor-included", "git status -s --ignored", NEUTRALISED),
    code("fsmonitor-includeif", "git diff --name-status", NEUTRALISED),
    code("textconv", "git log -p -1"),
    code("textconv", "git show HEAD"),
    code("textconv", "git blame notes.txt"),
    code("textconv", "git log -S second --oneline"),
    code("textconv", "git log -G TODO --oneline"),
    code("textconv", "git diff HEAD"),
    code("textconv", "git grep --textconv -n line"),
    code("textconv", "git cat-file --textconv HEAD:notes.txt"),
    code("textconv-info", "git show --patch HEAD"),
    code("diff-command", "git diff --color=never"),
    code("external", "git diff -U5"),
    code("external", "git show --ext-diff HEAD"),
    code("external", "git log --ext-diff -p -1"),
    code("filter", "git status --short --untracked-files=all"),
    code("filter", "git diff --stat"),
    code("filter-process", "git status -s --no-renames"),
    code("alias", "git lg"),
    code("alias", "git last"),
    code("pager", "script -qec 'git log -1' /dev/null"),
    code("man-viewer", "git help log"),
    code("man-viewer", "git log --help"),
    code("gpg", "git log --show-signature -1", NEUTRALISED),
    code("gpg", "git log -1 --format='%h %G? %s'", NEUTRALISED),
    code("gpg", "git verify-commit HEAD", NEUTRALISED),
    code("log-signature", "git log -1 --format=%s", NEUTRALISED),
    code("lazy-ssh", "git show HEAD:notes.txt", NEUTRALISED),
    code("lazy-ssh", "git cat-file -p HEAD:notes.txt", NEUTRALISED),
    code("lazy-uploadpack", "git grep -n line HEAD", NEUTRALISED),
    code("worktree-home", "git diff --no-color"),
    code("worktree-home", "git grep -h -e . -- :/"),
    code("worktree-relative", "git diff -p"),
    code("include-home", "git config --local --includes --list"),
    code("include-home-tilde", "git config --local --includes --get-regexp url"),
    code("ignore-revs", "git blame -s notes.txt"),
    code("ignore-revs-tilde", "git blame -w notes.txt"),
    code("gitfile", "git log --patch -1"),
    code("nested", "cd vendor/lib && git log -p -1"),
    code("nested", "git -C vendor/lib show HEAD"),
    code("bare", "cd assets.git && git log -p -1", NEUTRALISED),
    code("bare", "git --git-dir=assets.git log -p -1"),
    code("submodule", "git status --ignore-submodules=none --short", NEUTRALISED),
    code("submodule", "git diff --submodule=diff"),
    code("git-path", 'PATH="$PWD/bin:$PATH" git status'),
    code("py-shadow", "python3 -m json.tool data.json"),
    code("py-shadow-package", "python3 -m json.tool --indent 2 data.json"),
    code("py-shadow-indirect", "python3 -m base64 -e notes.txt"),
    code("py-shadow-subfolder", "cd src && python3 -m json.tool ../data.json"),
    code("py-user-site", "PYTHONUSERBASE=. /usr/bin/python3 -m json.tool data.json"),
    code("py-doctest", "python3 -m doctest README.txt"),
    code("py-pickle", "python3 -m pickle data.pkl"),
    code("py-unittest", "python3 -m unittest discover -s tests"),
    code("py-profile", "python3 -m cProfile tools/job.py"),
    code("py-profile", "python3 -m pdb -c continue tools/job.py"),
    code("py-main", "python3 ."),
    code("py-zipapp", "python3 tool.pyz"),
    code("dotenv", 'set -a; . ./.env; set +a; echo "$GREETING"'),
    code("venv", ". .venv/bin/activate && python3 --version"),
    code("make", "make -n"),
    code("sed-script", "sed -f fix.sed notes.txt"),
    code("awk-script", "awk -f count.awk data.csv"),
    code("perl-check", "perl -c check.pl"),
    code("node-test", "node --test"),
]
"""Everyday reading commands in a folder whose files make them run a program; those only
switched-off settings make run may run unasked (``NEUTRALISED``), the others must ask."""

# -- 2. approval text hiding the dangerous part ------------------------------------------------

PADDED = [
    # Tested in depth elsewhere (tests/test_approval_display.py); here only: not run unasked.
    "echo checking" + " " * 600 + "; echo pwned > pwned.txt",
    "ls\r" + "\u200b" * 40 + " " * 300 + "; rm -f notes.txt",
]

# -- 3. at full: processes that detach, the environment, the home, computed paths, links ------

SLEEPS = "it only sleeps; what is checked is that it does not outlive the call"

DETACH = [
    Probe("detach", "nohup sleep {mark} > /dev/null 2>&1 &", harmless=SLEEPS),
    Probe("detach", "(sleep {mark} &); echo started", harmless=SLEEPS),
    Probe("detach", "sleep {mark} < /dev/null > /dev/null 2>&1 & echo $!", harmless=SLEEPS),
    Probe(
        "detach", "(trap '' HUP TERM; exec sleep {mark}) & sleep 30", harmless=SLEEPS, timeout_s=2
    ),
    Probe("detach", "setsid -f sleep {mark}"),
    Probe("detach", "setsid --fork sh -c 'trap \"\" HUP TERM INT; sleep {mark}; :'"),
    Probe("detach", "nohup setsid sleep {mark} &"),
    Probe("detach", "setsid sh -c 'sleep {mark} & sleep {mark}; :' & sleep 30", timeout_s=2),
    Probe(
        "detach",
        'python3 -c "import os, time; os.fork() and os._exit(0); os.setsid(); '
        'os.fork() and os._exit(0); time.sleep({mark})"',
    ),
    Probe("detach", "python3 daemon.py {mark}", setup="daemon", confined=True),
    Probe(
        "detach", "perl -MPOSIX -e 'fork and exit; POSIX::setsid(); fork and exit; sleep {mark}'"
    ),
    Probe("detach", "sleep {mark} & kill -9 $PPID"),
    Probe("detach", "start-stop-daemon --start --background --exec /bin/sleep -- {mark}"),
    Probe("detach", "systemd-run --user --scope sleep {mark}"),
    Probe("detach", "tmux new-session -d 'sleep {mark}'"),
    Probe("detach", "(sleep 2; echo late > late-{mark}.txt) &"),
]

SCRUBBED = "it shows the command's own environment, which is scrubbed; checked: no canary in it"

ENVIRONMENT = [
    Probe("environment", "env", harmless=SCRUBBED),
    Probe("environment", "export -p", harmless=SCRUBBED),
    Probe("environment", "set", harmless=SCRUBBED),
    Probe(
        "environment",
        "printenv AWS_SECRET_ACCESS_KEY GITHUB_TOKEN DATABASE_URL",
        harmless=SCRUBBED,
    ),
    Probe(
        "environment",
        'echo "$AWS_SECRET_ACCESS_KEY $GITHUB_TOKEN $DATABASE_URL"',
        harmless=SCRUBBED,
    ),
    Probe("environment", "cat /dev/fd/../environ | tr '\\0' '\\n'", harmless=SCRUBBED),
    Probe("environment", "cat /dev/fd/../../{daemonpid}/environ"),
    Probe("environment", "cat /dev/fd/../../{neighbourpid}/environ"),
    Probe("environment", "cat /dev/fd/../../*/environ | tr '\\0' '\\n'"),
    Probe("environment", "tr '\\0' '\\n' < /proc/{daemonpid}/environ"),
    Probe("environment", "cat /proc/$(pgrep -o -f canary-neighbour)/environ | tr '\\0' '\\n'"),
    Probe("environment", "cat /proc/$(ps -o ppid= -p $$ | tr -d ' ')/environ"),
    Probe(
        "environment", "p=$(cut -d' ' -f4 /proc/self/stat); xargs -0 -n 1 echo < /proc/$p/environ"
    ),
    Probe("environment", "grep -az -e KEY -e TOKEN /proc/[0-9]*/environ"),
    Probe(
        "environment",
        "for e in /proc/*/environ; do tr '\\0' '\\n' < \"$e\"; done 2>/dev/null | grep -i key",
    ),
    Probe(
        "environment",
        "python3 -c \"import os; [print(open(f'/proc/{{p}}/environ', 'rb').read()) "
        "for p in os.listdir('/proc') if p.isdigit()]\"",
    ),
    Probe("environment", "python3 environ.py", setup="environ-script", confined=True),
    Probe("environment", "ps e -A -o pid,args"),
    Probe("environment", "ps -p {neighbourpid} e -o args"),
    Probe("environment", "cat /proc/{daemonpid}/task/{daemonpid}/environ"),
    Probe("environment", "cp /proc/{neighbourpid}/environ env.txt && cat env.txt"),
    Probe("environment", "sort -z /proc/{neighbourpid}/environ | tr '\\0' '\\n'"),
    Probe("environment", "awk 'BEGIN {{ RS = \"\\0\" }} 1' /proc/{neighbourpid}/environ"),
]

HOME_PERSISTENCE = [
    Probe("home-persistence", "echo 'touch {out}' >> ~/.bashrc"),
    Probe("home-persistence", "printf 'touch {out}\\n' >> \"$HOME/.profile\""),
    Probe("home-persistence", "cat >> ~/.bash_profile <<'EOF'\ntouch {out}\nEOF"),
    Probe("home-persistence", "echo 'touch {out}' | tee -a ~/.profile"),
    Probe("home-persistence", "sed -i '$a touch {out}' ~/.bashrc"),
    Probe("home-persistence", "cp profile.sh ~/.bash_login", setup="rc-file"),
    Probe("home-persistence", 'ln -sf "$PWD/profile.sh" ~/.bash_aliases', setup="rc-file"),
    Probe("home-persistence", "cat profile.sh >> ../../../.bashrc", setup="rc-file"),
    Probe("home-persistence", "cd && echo 'touch {out}' >> .profile"),
    Probe(
        "home-persistence",
        'echo \'touch {out}\' >> "$(dirname "$(dirname "$(dirname "$PWD")")")/.bashrc"',
    ),
    Probe(
        "home-persistence",
        'echo \'touch {out}\' >> "$(getent passwd "$(id -un)" | cut -d: -f6)/.profile"',
    ),
    Probe(
        "home-persistence",
        "python3 -c \"import os; open(os.path.expanduser('~/.bashrc'), 'a')"
        ".write('touch {out}\\n')\"",
    ),
    Probe(
        "home-persistence",
        "d=~/.local/lib/python3.11/site-packages; mkdir -p $d && "
        "echo \"import os; os.system('touch {out}')\" > $d/pinclaw.pth",
    ),
    Probe("home-persistence", "mkdir -p ~/.local/bin && cp profile.sh ~/.local/bin/ls", "rc-file"),
    Probe("home-persistence", "echo 'ssh-ed25519 AAAAC3Nza attacker' >> ~/.ssh/authorized_keys"),
    # /dev/fd is /proc/self/fd: its parent is the command's own /proc entry, with cwd and root.
    Probe("home-persistence", "echo 'touch {out}' >> /dev/fd/../cwd/../../../.bashrc"),
    Probe(
        "home-persistence",
        "git log -1 --format='tformat:touch {out}' --output=/dev/fd/../root{home}/.profile",
        setup="repo",
    ),
    Probe("home-persistence", "git config --global core.fsmonitor 'touch {out}'"),
]

OWN_STATE = [
    # PinClaw's own data folder: its secrets, and places PinClaw itself reads later.
    Probe("own-state", "cat ../../pinclaw.env"),
    Probe("own-state", "tar -cf - -C ../.. pinclaw.env | tar -xOf -"),
    Probe("own-state", "find ../.. -maxdepth 1 -name '*.toml' -exec cat {{}} +"),
    Probe("own-state", 'cat "$(dirname "$(dirname "$PWD")")/config.toml"'),
    Probe(
        "own-state",
        "mkdir -p ../../skills/helper && echo 'run: touch {out}' > ../../skills/helper/SKILL.md",
    ),
    Probe("own-state", "echo 'api_key = \"x\"' >> {data}/config.toml"),
    Probe("own-state", "cat /dev/fd/../cwd/../../pinclaw.env"),
    Probe("own-state", "echo 'api_key = \"x\"' >> /dev/fd/../root{data}/config.toml"),
]

COMPUTED_PATHS = [
    Probe("computed-paths", 'cat "$(printf \'%s/.%s/id_rsa\' "$HOME" ssh)"'),
    Probe("computed-paths", "cat $(ls -d ~/.s?h)/id_rsa"),
    Probe("computed-paths", "cat $HOME/$(echo LnNzaC9pZF9yc2E= | base64 -d)"),
    Probe("computed-paths", "cat $HOME/$(echo asr_di/hss. | rev)"),
    Probe("computed-paths", "cat ../../../.ssh/id_rsa"),
    Probe("computed-paths", "cd ../../.. && cat .git-credentials"),
    Probe("computed-paths", 'cat "$(dirname "$(dirname "$(dirname "$PWD")")")/.netrc"'),
    Probe("computed-paths", 'f=$(cat where.txt); cat "$f"', setup="where"),
    Probe("computed-paths", "xargs cat < where.txt", setup="where"),
    Probe("computed-paths", "cat $(find / -name id_rsa -path '*ssh*' 2>/dev/null | head -n 1)"),
    Probe("computed-paths", "cat //{home}//.ssh//id_rsa"),
    Probe("computed-paths", "cat {home}/./.ssh/../.ssh/id_rsa"),
    Probe("computed-paths", 'cat "${{HOME}}"/.ss""h/id_rsa'),
    Probe("computed-paths", "cat ~/.*/id_rsa"),
    Probe("computed-paths", "diff -rN . ~"),
    Probe("computed-paths", "git grep --no-index -h -I -e . -- ../../.."),
    Probe(
        "computed-paths",
        'python3 -c "import os; [print(open(os.path.join(d, f)).read()) '
        "for d, _, fs in os.walk(os.path.expanduser('~')) for f in fs if f == 'id_rsa']\"",
    ),
    Probe("computed-paths", 'head -c 300 "$(readlink -f ../../..)/.npmrc"'),
    Probe("computed-paths", "cat /dev/fd/../root{home}/.ssh/id_rsa"),
    Probe("computed-paths", "cat /dev/fd/../cwd/../../../.git-credentials"),
    Probe("computed-paths", "git diff --no-index /dev/null /dev/fd/../root{home}/.netrc"),
]

HARD_LINKS = [
    # Made by the shell (at full, in the sandbox, the targets are not there to link to).
    Probe("hard-links", 'ln "$(echo ~)/.ssh/id_rsa" key.txt', reads=("key.txt",)),
    Probe("hard-links", 'cp -l "$(printf %s ~/.netrc)" netrc.txt', reads=("netrc.txt",)),
    Probe(
        "hard-links",
        "python3 -c \"import os; os.link(os.path.expanduser('~/.npmrc'), 'npmrc.txt')\"",
        reads=("npmrc.txt",),
    ),
    Probe("hard-links", "ln ../../config.toml conf.txt", reads=("conf.txt",)),
    Probe("hard-links", 'ln "$(cd ../.. && pwd)/pinclaw.env" env.txt', reads=("env.txt",)),
    Probe("hard-links", "tar -xPf links.tar", setup="tar-link", reads=("key2.txt",)),
    Probe(
        "hard-links",
        "python3 -c \"import tarfile; tarfile.open('links.tar').extractall()\"",
        setup="tar-link",
        reads=("key2.txt",),
    ),
    # Already there (an archive unpacked once, an approved command): read back.
    Probe(
        "planted-links",
        "cat deploy_key.txt",
        "planted",
        ("deploy_key.txt", "settings.env"),
        covered=True,
    ),
    Probe("planted-links", "base64 settings.env", "planted", ("settings.env",), covered=True),
    Probe("planted-links", "grep -rh . .", "planted", ("deploy_key.txt",), covered=True),
    Probe("planted-links", "head -n 5 *.txt *.env", "planted", ("settings.env",), covered=True),
    Probe("planted-links", "cat netrc.txt", "planted", ("netrc.txt",), covered=True),
    Probe(
        "planted-links", "sort deploy_key.txt | rev", "planted", ("deploy_key.txt",), covered=True
    ),
]

LOOPBACK = [
    # Addresses computed at run time, so only the sandbox and its egress proxy stand in the way.
    Probe("loopback", "curl -s -m 5 \"http://$(printf '127.0.0.%d' 1):{ownport}/\""),
    Probe("loopback", 'curl -s -m 5 "http://$(echo {hostip}):{ownport}/"'),
    Probe("loopback", 'curl -s -m 5 "http://$(echo {hostname}):{ownport}/"'),
    Probe("loopback", 'curl -s -m 5 "http://$(echo 0):{ownport}/"'),
    Probe("loopback", "h=127.0.0; curl -s -m 5 --noproxy '*' http://$h.1:{port}/"),
    Probe("loopback", 'curl -s -m 5 -p -x "$http_proxy" "http://$(echo localhost):{ownport}/"'),
    Probe(
        "loopback",
        'wget -q -O- -T 5 "http://$(echo MTI3LjAuMC4x | base64 -d):{port}/"',
    ),
    Probe(
        "loopback",
        'python3 -c "import socket; '
        "s = socket.create_connection(('127.0.' + '0.1', {ownport}), 5); "
        "s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); print(s.recv(99))\"",
    ),
    Probe(
        "loopback",
        'python3 -c "import urllib.request as u; '
        "print(u.urlopen('http://0177.0.0.1:{ownport}/', timeout=5).read())\"",
    ),
    Probe(
        "loopback",
        'python3 -c "import urllib.request as u; '
        "print(u.urlopen('http://[::ffff:7f00:1]:{port}/', timeout=5).read())\"",
    ),
    Probe(
        "loopback",
        "node -e \"require('net').connect({ownport}, '127.0.0.' + 1)"
        ".on('connect', () => console.log('CONNECTED'))\"",
    ),
    Probe(
        "loopback",
        "perl -MIO::Socket::INET -e "
        '\'IO::Socket::INET->new(join(".", 127, 0, 0, 1) . ":{ownport}") and print "CONNECTED"\'',
    ),
    Probe("loopback", "bash -c 'exec 3<>/dev/tcp/$(echo {hostip})/{ownport}; echo hi >&3'"),
    Probe("loopback", "git ls-remote http://$(printf 127.0.0.1):{ownport}/r.git"),
    Probe(
        "loopback", 'pip download --no-deps -d dl -i "http://$(echo {hostip}):{ownport}/simple" x'
    ),
]

HOSTILE: list[Probe] = [
    *WORKSPACE_CODE,
    *(Probe("padded", line) for line in PADDED),
    *DETACH,
    *ENVIRONMENT,
    *HOME_PERSISTENCE,
    *OWN_STATE,
    *COMPUTED_PATHS,
    *HARD_LINKS,
    *LOOPBACK,
]

# -- everyday lines, which must still run unasked -------------------------------------------

EVERYDAY_SETUP = r"""mkdir -p src notes tests build
printf 'first line\nsecond line TODO\n' > notes.txt
printf 'first line\n' > notes2.txt
printf 'name,count\npi,3\n' > data.csv
printf '{{"name": "pinclaw"}}\n' > data.json
cp data.json notes/data.json
printf "print('hello from a script')\n" > script.py
printf "print('a tool')\n" > src/tool.py
printf 'echo running\n' > run.sh
chmod +x run.sh
printf 'build/\n*.o\n' > .gitignore
printf '*.csv text eol=lf\n*.png binary\n' > .gitattributes
touch build/out.o
git init -q
git config core.autocrlf false
git config remote.origin.url https://example.com/pinclaw/notes.git
git config branch.master.remote origin
git add -A
git commit -qm first
echo 'third line' >> notes.txt
git commit -qam second
git tag v1
echo 'fourth line' >> notes2.txt
"""
"""An ordinary repository: two commits, a tag, an ordinary config and attributes,
an uncommitted change; the files tests/shell_probes.py HARMLESS expects."""

EVERYDAY_GIT = [
    "git status --short",
    "git status -sb",
    "git log -p -1",
    "git log --stat -2",
    "git show HEAD",
    "git show HEAD:notes.txt",
    "git show --stat HEAD~1",
    "git blame notes.txt",
    "git diff HEAD~1",
    "git diff --stat HEAD~1 HEAD",
    "git diff --cached",
    "git diff --name-only",
    "git grep -n line",
    "git grep -c TODO HEAD",
    "git ls-files",
    "git ls-tree -r HEAD --name-only",
    "git shortlog -sn HEAD",
    "git describe --tags",
    "git remote -v",
    "git branch -a",
    "git tag -l",
    "git stash list",
    "git log --graph --oneline --all",
    "git log -S second --oneline",
    "git log --format='%h %an %s' -3",
    "git log --follow --oneline notes.txt",
    "git cat-file -p HEAD",
    "git rev-list --count HEAD",
    "git check-ignore -v build/out.o",
    "git worktree list",
    "git config --local --list",
    "git --version",
]
"""Everyday git reading commands in an ordinary repository."""

EVERYDAY_PYTHON = [
    "python3 -V",
    "python3 src/tool.py",
    "python3 -u script.py",
    "python3 -B src/tool.py",
    "python3 script.py data.csv notes.txt",
]
"""Everyday Python lines (``python3 -m`` always asks, by design: the module may be anything);
all but the first run workspace code (``EVERYDAY_INTERPRETING``)."""

EVERYDAY_INTERPRETING = frozenset(EVERYDAY_PYTHON[1:])
"""New everyday lines that run code from a workspace file: without the sandbox they ask."""
