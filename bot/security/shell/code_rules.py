"""Rules for commands that run other code: shells, interpreters, find, xargs, sed, awk, eval.

Nested code is classified like the line around it (``bash -c``, ``find -exec``,
``xargs``, ``eval``, ``trap``, ``watch``, ``su -c``); inline code for an
interpreter cannot be checked and is high risk.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.security.shell.git import package_manager
from bot.security.shell.lexer import Word
from bot.security.shell.network import contacts
from bot.security.shell.project_rules import module_shadowing
from bot.security.shell.rules import RULES, Rule, positional, rule
from bot.security.shell.tables import INLINE_LONG, INTERPRETERS, SHELLS, VERSION_FLAGS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bot.security.shell.call import Call, Walker

_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "nc", "ncat", "netcat", "socat", "ssh"})
_SED_COMMAND = re.compile(
    r"(?:^|[;{}\n])\s*(?:[0-9$]+|/(?:\\.|[^/])*/)?(?:\s*,\s*(?:[0-9$]+|/(?:\\.|[^/])*/))?"
    r"\s*!?\s*[ewWrR](?:\s|$)"
)
_SED_SUBSTITUTE = re.compile(r"s(.)(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1[gpIiMm0-9]*[ew]")
_AWK_RUNS = re.compile(r"\bsystem\s*\(|\|\s*getline|\|&|\bprintf?\b[^;}]*\|")
_AWK_WRITES = re.compile(r"\bprintf?\b[^;}]*>")


@rule("find")
def _find(w: Walker, call: Call) -> None:
    args = call.args
    index = 0
    while index < len(args):
        text = args[index].text
        if text in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((j for j in range(index + 1, len(args)) if args[j].text in (";", "+")), None)
            inner = args[index + 1 : len(args) if end is None else end]
            w.add("medium", f"find {text} runs a command on every match")
            if inner:
                w.run_words(inner, generated=True)
            index = len(args) if end is None else end + 1
            continue
        if text == "-delete":
            w.add("high", "find -delete deletes every match")
        elif text in ("-fprint", "-fprint0", "-fprintf", "-fls") and index + 1 < len(args):
            w.judge(args[index + 1], "write")
            index += 1
        elif not text.startswith("-") and text not in ("(", ")", "!", ","):
            w.judge(args[index], "read")
        index += 1


@rule("xargs")
def _xargs(w: Walker, call: Call) -> None:
    values = {"-I", "-n", "-P", "-L", "-s", "-d", "-E", "-a", "--arg-file", "--delimiter"}
    args = list(call.args)
    while args and args[0].text.startswith("-") and args[0].text != "--":
        option = args.pop(0).text
        if option in values and args:
            args.pop(0)
    if args and args[0].text == "--":
        args.pop(0)
    inner = args or [Word("echo")]
    w.add("medium", f"xargs runs {inner[0].text} with arguments read from its input")
    w.run_words(inner, generated=True)


def _stdin_code(w: Walker, call: Call, language: str) -> None:
    """A shell or interpreter without a program argument runs whatever its input holds."""
    if call.stdin == "pipe":
        if _DOWNLOADERS.intersection(call.upstream):
            w.add("high", f"it downloads code and runs it with {call.name}")
        else:
            w.add("high", f"it pipes text into {call.name}, which runs whatever it is given")
    elif call.stdin == "text":
        w.add("high", f"{call.name} runs {language} code given on its input, which is not checked")
    elif call.stdin_file is not None:
        w.judge(call.stdin_file, "run")
    elif w.generating:
        w.add("high", f"{call.name} runs {language} code only known when it runs")
    else:
        w.add("medium", f"{call.name} runs {language} code from its input")


@rule(*SHELLS)
def _shell(w: Walker, call: Call) -> None:
    args, index, inline, from_input = call.args, 0, False, False
    while index < len(args):
        text = args[index].text
        if text == "--":
            index += 1
            break
        if text in ("--rcfile", "--init-file") and index + 1 < len(args):
            w.judge(args[index + 1], "run")
        if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            index += 2
            continue
        if not text.startswith(("-", "+")) or len(text) == 1:
            break
        inline = inline or (not text.startswith("--") and "c" in text)
        from_input = from_input or (not text.startswith("--") and "s" in text)
        index += 1
    rest = args[index:]
    if from_input and not inline:
        _stdin_code(w, call, "shell")
        w.judge_args(rest, "read")
    elif inline:
        if rest:
            w.line(rest[0].text, at_least=f"{call.name} -c runs a nested command line")
            w.judge_args(rest[1:], "read")  # $0, $1...: what the nested line works on
        else:
            w.add("high", f"{call.name} -c runs a command line only known when it runs")
    elif rest:
        w.judge(rest[0], "run")
        w.judge_args(rest[1:], "read")
    else:
        _stdin_code(w, call, "shell")


@rule(*INTERPRETERS)
def _interpreter(w: Walker, call: Call) -> None:
    language, inline_letters, value_letters = INTERPRETERS[call.name]
    args, index = call.args, 0
    if len(args) == 1 and args[0].text in VERSION_FLAGS:
        return
    while index < len(args):
        text = args[index].text
        if text in INLINE_LONG or text.startswith(("--eval=", "--print=")):
            w.add("high", f"inline {language} code cannot be checked")
            return
        if text == "--" or not text.startswith("-") or len(text) == 1:
            index += text == "--"
            break
        letters = "" if text.startswith("--") else text[1:]
        for at, letter in enumerate(letters):
            if letter in inline_letters:
                w.add("high", f"inline {language} code cannot be checked")
                return
            if letter == "m" and call.name == "python":
                attached = letters[at + 1 :]
                rest = args[index + (1 if attached else 2) :]
                module = attached or (args[index + 1].text if index + 1 < len(args) else "")
                _python_module(w, call, module, rest)
                return
            if letter in value_letters:
                index += not letters[at + 1 :]  # the value is the next word
                break
        index += 1
    if index < len(args) and args[index].text != "-":
        w.judge(args[index], "run")
        w.judge_args(args[index + 1 :], "read")
    else:
        _stdin_code(w, call, language)


def _python_module(w: Walker, call: Call, module: str, rest: Sequence[Word]) -> None:
    for contact in contacts("python", rest):
        w.contact(*contact)
    if module in ("pip", "pip3"):
        module_shadowing(w, module)  # the current folder comes first on the module path
        package_manager(w, call.but(name="pip", args=list(rest)))
    else:
        w.add("medium", f"python -m {module} runs the module {module}")
        w.judge_args(rest, "read")


@rule("sed")
def _sed(w: Walker, call: Call) -> None:
    scripts: list[str] = []
    files: list[Word] = []
    in_place = has_script = False
    words = iter(call.args)
    for word in words:
        text = word.text
        if text in ("-e", "--expression", "-f", "--file"):
            value = next(words, Word(""))
            if text in ("-e", "--expression"):
                scripts.append(value.text)
            else:
                w.judge(value, "run")
            has_script = True
        elif text.startswith(("--file=", "--expression=")):
            option, _, value_text = text.partition("=")
            if option == "--file":
                w.judge(Word(value_text, word.expands, word.glob, word.quoted), "run")
            else:
                scripts.append(value_text)
            has_script = True
        elif text.startswith("-f") and len(text) > 2 and not text.startswith("--"):
            w.judge(Word(text[2:], word.expands, word.glob, word.quoted), "run")
            has_script = True
        elif text.startswith("--"):
            in_place = in_place or text.startswith("--in-place")
        elif text.startswith("-") and len(text) > 1:
            letters = text[1:].split("i", 1)[0]
            in_place = in_place or len(letters) < len(text) - 1
            if "e" in letters:
                script = letters.split("e", 1)[1] or next(words, Word("")).text
                scripts.append(script)
                has_script = True
        else:
            files.append(word)
    if not has_script and files:
        scripts.append(files.pop(0).text)
    if any(_SED_COMMAND.search(s) or _SED_SUBSTITUTE.search(s) for s in scripts):
        w.add("high", "the sed script can run commands or read and write other files")
    if in_place:
        w.add("medium", "sed -i edits files in place")
    for word in files:
        w.judge(word, "write" if in_place else "read")


@rule("awk")
def _awk(w: Walker, call: Call) -> None:
    args, index, program = call.args, 0, None
    while index < len(args):
        text = args[index].text
        if text in ("-f", "--file") and index + 1 < len(args):
            w.judge(args[index + 1], "run")
            program, index = "", index + 2
        elif text.startswith(("--file=", "-f")) and len(text) > 2 and text != "--file":
            value = text.split("=", 1)[1] if text.startswith("--file=") else text[2:]
            w.judge(Word(value, args[index].expands, args[index].glob, args[index].quoted), "run")
            program, index = "", index + 1
        elif text in ("-v", "-F", "--assign", "--field-separator"):
            index += 2
        elif text.startswith("-") and len(text) > 1 and text != "--":
            index += 1
        else:
            index += text == "--"
            break
    rest = list(args[index:])
    if program is None and rest:
        program = rest.pop(0).text
    if program and _AWK_RUNS.search(program):
        w.add("high", "the awk program runs commands (system or a pipe)")
    elif program and _AWK_WRITES.search(program):
        w.add("medium", "the awk program writes files")
    w.judge_args(rest, "read")


@rule("dc")
def _dc(w: Walker, call: Call) -> None:
    if any("!" in word.text for word in call.args) or call.stdin in ("pipe", "text"):
        w.add("high", "dc runs shell commands written after ! in its program")
    words = iter(call.args)
    for word in words:
        if word.text in ("-f", "--file"):
            w.judge(next(words, Word("")), "run")
        elif word.text in ("-e", "--expression"):
            next(words, None)
        elif not word.text.startswith("-"):
            w.judge(word, "run")


@rule("eval")
def _eval(w: Walker, call: Call) -> None:
    w.line(" ".join(word.text for word in call.args))


@rule("source", ".")
def _source(w: Walker, call: Call) -> None:
    if not call.args:
        return
    script = call.args[0]
    if script.expands or script.subs:
        w.add("high", f"{call.name} runs code that is only known when it runs")
    else:
        w.judge(script, "run")
    w.judge_args(call.args[1:], "read")


@rule("trap")
def _trap(w: Walker, call: Call) -> None:
    words = positional(call.args)
    if len(words) >= 2 and words[0].text not in ("", "-"):
        w.line(words[0].text, at_least="trap runs a command when a signal arrives")


@rule("watch")
def _watch(w: Walker, call: Call) -> None:
    args = list(call.args)
    direct = False
    while args and args[0].text.startswith("-"):
        option = args.pop(0).text
        direct = direct or option in ("-x", "--exec")
        if option in ("-n", "--interval", "-q", "--equexit") and args:
            args.pop(0)
    if not args:
        return
    w.add("medium", f"watch runs {args[0].text} again and again")
    if direct:
        w.run_words(args)
    else:
        w.line(" ".join(word.text for word in args))


@rule("su", "script")
def _command_option(w: Walker, call: Call) -> None:
    words = iter(call.args)
    rest: list[Word] = []
    for word in words:
        text = word.text
        cluster = text.startswith("-") and not text.startswith("--") and text.endswith("c")
        if text in ("--command", "--session-command") or cluster:
            w.line(next(words, Word("")).text)
        elif text.startswith(("--command=", "--session-command=")):
            w.line(text.partition("=")[2])
        else:
            rest.append(word)
    if call.name == "script":
        w.add("medium", "script records a session into a file")
        w.judge_args(positional(rest, {"-T", "-t", "-I", "-O", "-B", "-E", "-m"}), "write")


ALL_RULES: dict[str, Rule] = RULES
"""Every rule: those of ``shell.rules`` and, registered on import, this module's."""
