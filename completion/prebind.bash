# bash completion for prebind(1)                           -*- shell-script -*-
#
# Options, their values (--format/--print, --ready, --restart, files for
# --port-file, variable names for -E), and after the first non-option word
# or "--", the command and its own arguments. Works with bash-completion
# loaded (the command's own completion is used then) or without it.

# Long options that take a value ("=" attached, or as the next word).
_prebind_opts_with_arg=(--listen --backlog --socket-mode --port-file --port-fd --format
    --setenv --kill-after --success-status --restart --restart-delay --restart-limit
    --max-connections --intercept --intercept-via --ready-log --ready-exec --ready-interval --ready-timeout
    --share --share-linger --reload --watch --watch-delay --watch-ignore)
# Long options whose value is optional and must be attached with "=".
_prebind_opts_optional_arg=(--print --ready --ready-http)
_prebind_opts_no_arg=(--reuseport --v6only --subst --exec --accept --inetd --group
    --die-with-parent --no-die-with-supervisor --subreaper --netns --status --stop --quiet --verbose --help --version)
_prebind_short_opts=(-l -E -q -v -h)

# Completions for the value of option $1, given the value typed so far $2.
_prebind_values() {
    local opt=$1 value=$2
    case $opt in
        --format | --print)
            mapfile -t COMPREPLY < <(compgen -W 'port addr url json env' -- "$value")
            ;;
        --ready | --ready-timeout | --share-linger)
            mapfile -t COMPREPLY < <(compgen -W 'infinity' -- "$value")
            ;;
        --restart)
            mapfile -t COMPREPLY < <(compgen -W 'no on-failure always' -- "$value")
            ;;
        --intercept-via)
            mapfile -t COMPREPLY < <(compgen -W 'auto seccomp preload forward' -- "$value")
            ;;
        --reload)
            mapfile -t COMPREPLY < <(compgen -W 'restart overlap' -- "$value")
            ;;
        --port-file | --watch)
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$value")
            ;;
        --setenv | -E)
            # -E NAME copies NAME from prebind's environment.
            mapfile -t COMPREPLY < <(compgen -e -- "$value")
            ;;
        *)
            # Addresses, numbers and durations: nothing to offer.
            COMPREPLY=()
            ;;
    esac
}

_prebind() {
    local -a words=() orig=()
    local cword=0 i w join=0

    # bash splits "--format=url" into "--format" "=" "url" when "=" is in
    # COMP_WORDBREAKS (the default): put the words back together, and
    # remember where each one starts in COMP_WORDS.
    for ((i = 0; i <= COMP_CWORD && i < ${#COMP_WORDS[@]}; i++)); do
        w=${COMP_WORDS[i]}
        if ((i > 0)) && [[ $w == = ]] || ((join)); then
            words[${#words[@]}-1]+=$w
            [[ $w == = ]] && join=1 || join=0
        else
            words+=("$w")
            orig+=("$i")
        fi
        ((i == COMP_CWORD)) && cword=$((${#words[@]} - 1))
    done
    local cur=${words[cword]} prev=
    ((cword > 0)) && prev=${words[cword - 1]}

    # Where does COMMAND start? Options stop at "--" or at the first word
    # that is neither an option nor an option's value (getopt's "+").
    local cmd=0 value_next=0 o c
    for ((i = 1; i < cword; i++)); do
        w=${words[i]}
        if ((value_next)); then
            value_next=0
            continue
        fi
        case $w in
            --)
                cmd=$((i + 1))
                break
                ;;
            --*=*) ;;
            --*)
                for o in "${_prebind_opts_with_arg[@]}"; do
                    [[ $w == "$o" ]] && value_next=1
                done
                ;;
            -?*)
                # A cluster such as -qvl: the value of -l or -E is the rest
                # of the word, or the next word.
                for ((c = 1; c < ${#w}; c++)); do
                    if [[ ${w:c:1} == [lE] ]]; then
                        ((c == ${#w} - 1)) && value_next=1
                        break
                    fi
                done
                ;;
            *)
                cmd=$i
                break
                ;;
        esac
    done
    if ((cmd > 0 && cword >= cmd)); then
        if declare -F _command_offset >/dev/null; then
            # bash-completion: complete COMMAND as if typed on its own.
            _command_offset "${orig[cmd]}"
        elif ((cword == cmd)); then
            mapfile -t COMPREPLY < <(compgen -c -- "$cur")
        else
            compopt -o default 2>/dev/null
            COMPREPLY=()
        fi
        return 0
    fi

    # The value of an option: attached with "=", or the next word.
    if [[ $cur == --*=* ]]; then
        local opt=${cur%%=*} value=${cur#*=}
        _prebind_values "$opt" "$value"
        # bash replaces only what follows the "=" when "=" breaks words;
        # otherwise the whole word, option included.
        if [[ $COMP_WORDBREAKS != *=* ]]; then
            for i in "${!COMPREPLY[@]}"; do
                COMPREPLY[i]="$opt=${COMPREPLY[i]}"
            done
        fi
        return 0
    fi
    case $prev in
        --format | --port-file | --setenv | -E | --restart | --intercept-via)
            _prebind_values "$prev" "$cur"
            return 0
            ;;
        --listen | -l | --backlog | --socket-mode | --port-fd | --kill-after | \
            --success-status | --restart-delay | --restart-limit | --max-connections | --intercept | --share)
            COMPREPLY=()
            return 0
            ;;
    esac

    if [[ $cur == -* ]]; then
        local -a opts=()
        for o in "${_prebind_opts_with_arg[@]}"; do
            opts+=("$o=")
        done
        for o in "${_prebind_opts_optional_arg[@]}"; do
            opts+=("$o" "$o=")
        done
        opts+=("${_prebind_opts_no_arg[@]}" "${_prebind_short_opts[@]}" --)
        mapfile -t COMPREPLY < <(compgen -W "${opts[*]}" -- "$cur")
        # No space after "--format=": the value follows.
        if ((${#COMPREPLY[@]} == 1)) && [[ ${COMPREPLY[0]} == *= ]]; then
            compopt -o nospace 2>/dev/null
        fi
        return 0
    fi

    # The first word that is not an option is COMMAND.
    mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    return 0
} &&
    complete -F _prebind prebind

# ex: filetype=sh
