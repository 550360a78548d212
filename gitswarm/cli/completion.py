"""Shell completion scripts for bash, zsh and fish, generated from the command tree.

The scripts are static: they hold every command, subcommand and option, so a
TAB never starts gitswarm (that would cost a start-up per keypress). They
complete commands and subcommands, options (after `-`), the choices of an
argument that has some (`completion bash|zsh|fish`, `help COMMAND`), and
file names everywhere else. `gitswarm completion SHELL` prints one; nothing
is installed and no rc file is touched.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

SHELLS = ("bash", "zsh", "fish")
HELP_OPTIONS = ("-h", "--help")


@dataclass(frozen=True)
class Node:
    """One command of the tree, by its path ("" for gitswarm itself, "worktrees list")."""

    path: str
    commands: dict[str, str]  # subcommand -> its one-line help
    options: dict[str, str]  # option -> its help
    valued: tuple[str, ...]  # the options that take a value
    words: tuple[str, ...]  # the choices of its argument


def nodes(root: Any) -> list[Node]:
    """Every visible command of a click command tree (typer builds one), the root first."""
    found = list(_walk(root, ""))
    top = found[0]
    # `help COMMAND` takes the top-level commands.
    return [Node(n.path, n.commands, n.options, n.valued, tuple(top.commands)) if n.path == "help" else n for n in found]


def _walk(command: Any, path: str) -> Iterator[Node]:
    subs = {name: sub for name, sub in getattr(command, "commands", {}).items() if not sub.hidden}
    options: dict[str, str] = {}
    valued: list[str] = []
    words: list[str] = []
    for param in command.params:
        if param.param_type_name == "argument":
            words.extend(str(c) for c in getattr(param.type, "choices", None) or ())
            continue
        if getattr(param, "hidden", False):
            continue
        for name in [*param.opts, *param.secondary_opts]:
            options[name] = _one_line(getattr(param, "help", None) or "")
            if not (getattr(param, "is_flag", False) or getattr(param, "count", False)):
                valued.append(name)
    for name in HELP_OPTIONS:
        options[name] = "Show the help and exit."
    yield Node(path, {n: _one_line(s.get_short_help_str(limit=70)) for n, s in subs.items()}, options, tuple(valued), tuple(words))
    for name, sub in subs.items():
        yield from _walk(sub, f"{path} {name}".strip())


def _one_line(text: str) -> str:
    return " ".join(text.split())


def script(shell: str, root: Any) -> str:
    """The completion script for `shell` (one of SHELLS)."""
    tree = nodes(root)
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](tree)


def _data_function(name: str, tree: Sequence[Node]) -> str:
    """A shell function (bash and zsh alike): `NAME KIND PATH` prints the commands, options,
    valued options or argument words of the command at PATH, separated by spaces."""
    lines = [f"{name}() {{", '    case "$1:$2" in']
    for node in tree:
        for kind, values in (("commands", node.commands), ("options", node.options), ("valued", node.valued), ("words", node.words)):
            if values:
                lines.append(f'        "{kind}:{node.path}") echo "{" ".join(values)}" ;;')
    lines += ["    esac", "}"]
    return "\n".join(lines)


_BASH = """\
# bash completion for gitswarm, git-swarm and `git swarm`: printed by `gitswarm completion bash`.
# Load it in this shell:  eval "$(gitswarm completion bash)"
# or in every new one:    gitswarm completion bash > ~/.local/share/bash-completion/completions/gitswarm
{data}

_gitswarm_at() {{  # $1: where in COMP_WORDS the words after the program start
    local cur="${{COMP_WORDS[COMP_CWORD]}}" path_="" word value=0 i
    for ((i = $1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        if [[ " $(_gitswarm_data valued "$path_") " == *" $word "* ]]; then
            ((i + 1 == COMP_CWORD)) && value=1
            ((i++))
        elif [[ "$word" != -* && " $(_gitswarm_data commands "$path_") " == *" $word "* ]]; then
            path_="${{path_:+$path_ }}$word"
        fi
    done
    COMPREPLY=()
    ((value)) && return 0  # an option's value: file names
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$(_gitswarm_data options "$path_")" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$(_gitswarm_data commands "$path_") $(_gitswarm_data words "$path_")" -- "$cur"))
    fi
}}

_gitswarm() {{
    _gitswarm_at 1
}}

# git's own completion calls this for `git swarm ...` (it completes without adding spaces).
_git_swarm() {{
    _gitswarm_at "$((${{__git_cmd_idx:-1}} + 1))"
    COMPREPLY=("${{COMPREPLY[@]/%/ }}")
}}

complete -o default -F _gitswarm gitswarm git-swarm
"""

_ZSH = """\
#compdef gitswarm git-swarm
# zsh completion for gitswarm and git-swarm: printed by `gitswarm completion zsh`.
# Load it in this shell (after compinit):  eval "$(gitswarm completion zsh)"
# or in every new one:  gitswarm completion zsh > ~/.zfunc/_gitswarm  (with ~/.zfunc in fpath before compinit)
{data}

_gitswarm() {{
    local path_="" word value=0 i
    local -a found
    for (( i = 2; i < CURRENT; i++ )); do
        word=${{words[i]}}
        if [[ " $(_gitswarm_data valued "$path_") " == *" $word "* ]]; then
            (( i + 1 == CURRENT )) && value=1
            (( i++ ))
        elif [[ $word != -* && " $(_gitswarm_data commands "$path_") " == *" $word "* ]]; then
            path_="${{path_:+$path_ }}$word"
        fi
    done
    if (( value )); then
        _files
        return
    fi
    if [[ ${{words[CURRENT]}} == -* ]]; then
        found=(${{=$(_gitswarm_data options "$path_")}})
    else
        found=(${{=$(_gitswarm_data commands "$path_")}} ${{=$(_gitswarm_data words "$path_")}})
    fi
    if (( ${{#found}} )); then
        compadd -- $found
    else
        _files
    fi
}}

if [[ "${{zsh_eval_context[-1]}}" == loadautofunc ]]; then
    _gitswarm "$@"
else
    compdef _gitswarm gitswarm git-swarm
fi
"""

_FISH = """\
# fish completion for gitswarm and git-swarm: printed by `gitswarm completion fish`.
# Load it in this shell:  gitswarm completion fish | source
# or in every new one:    gitswarm completion fish > ~/.config/fish/completions/gitswarm.fish
function __gitswarm_data
    switch "$argv[1]:$argv[2]"
{cases}
    end
end

function __gitswarm_path --description 'the gitswarm command typed so far'
    set -l path_ ''
    set -l skip 0
    for word in (commandline -opc)[2..-1]
        if test $skip = 1
            set skip 0
        else if contains -- $word (__gitswarm_data valued "$path_")
            set skip 1
        else if not string match -q -- '-*' $word; and contains -- $word (__gitswarm_data commands "$path_")
            set path_ (string trim -- "$path_ $word")
        end
    end
    echo $path_
end

function __gitswarm_at --description 'whether the command typed so far is $argv[1]'
    set -l found (__gitswarm_path)
    test "$found" = "$argv[1]"
end

for program in gitswarm git-swarm
{completes}
end
"""


def _bash(tree: Sequence[Node]) -> str:
    return _BASH.format(data=_data_function("_gitswarm_data", tree))


def _zsh(tree: Sequence[Node]) -> str:
    return _ZSH.format(data=_data_function("_gitswarm_data", tree))


def _fish(tree: Sequence[Node]) -> str:
    cases = []
    for node in tree:
        for kind, values in (("commands", node.commands), ("valued", node.valued)):
            if values:
                cases.append(f"        case '{kind}:{node.path}'\n            printf '%s\\n' {' '.join(values)}")
    completes = []
    for node in tree:
        at = _fish_quote(f"__gitswarm_at '{node.path}'")
        for name, help_text in node.commands.items():
            completes.append(f"    complete -c $program -n {at} -f -a {name} -d {_fish_quote(help_text)}")
        for word in node.words:
            completes.append(f"    complete -c $program -n {at} -f -a {word}")
        for name, help_text in node.options.items():
            flag = f"-l {name[2:]}" if name.startswith("--") else f"-s {name[1:]}"
            needs = " -r" if name in node.valued else ""
            completes.append(f"    complete -c $program -n {at} {flag}{needs} -d {_fish_quote(help_text)}")
    return _FISH.format(cases="\n".join(cases), completes="\n".join(completes))


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
