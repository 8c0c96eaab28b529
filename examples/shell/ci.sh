#!/usr/bin/env bash
# Start a server through prebind in a CI job, hand its address to the later
# steps through $GITHUB_ENV, check it, stop it.
#
#   ci.sh [run] [--] [COMMAND [ARG]...]   start, curl $PREBIND_URL, stop
#   ci.sh start [--] [COMMAND [ARG]...]   start in the background, publish, return
#   ci.sh stop                            SIGTERM, wait, exit with the server's status
#
# COMMAND defaults to the stdlib Python server of examples/python. prebind is
# $PREBIND, or prebind on PATH. Outside GitHub Actions, $GITHUB_ENV defaults
# to a temporary file. Every wait is bounded; the server's output goes to
# $PREBIND_CI_DIR/server.log (kept if the server fails), never to the
# step's own output, which a background process must not hold open.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
prebind=${PREBIND:-prebind}
timeout=20 # seconds

die() {
    echo "ci.sh: $*" >&2
    exit 1
}

# start COMMAND...: run prebind in the background and source what it
# publishes (--format=env) into this shell: PREBIND_URL, PREBIND_PORT,
# PREBIND_PID, ... Then append the same lines to $GITHUB_ENV.
start() {
    PREBIND_CI_DIR=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/prebind-ci.XXXXXX")
    local dir=$PREBIND_CI_DIR
    if [ -z "${GITHUB_ENV:-}" ]; then
        GITHUB_ENV=$(mktemp "${TMPDIR:-/tmp}/github_env.XXXXXX")
    fi
    mkfifo "$dir/published"

    # prebind writes the addresses to fd 3 (the fifo) and closes it; the
    # server never gets fd 3. The subshell records prebind's exit status
    # for 'stop' (prebind is not the child of a later step's shell).
    # --kill-after bounds the stop. --success-status=143: a server that dies
    # of our SIGTERM (it may come before the server has set up its handler)
    # stopped as asked. Without --die-with-parent, the server outlives this
    # step, for the next ones.
    # Neither the subshell nor the server keeps this step's output open.
    (
        set +e
        "$prebind" --port-fd=3 --format=env --kill-after=10s --success-status=143 \
            -l web=0 -- "$@" 3>"$dir/published"
        echo $? >"$dir/status.tmp" && mv "$dir/status.tmp" "$dir/status"
    ) >"$dir/server.log" 2>&1 </dev/null &

    # EOF comes as soon as prebind has published (or at once if it failed).
    # The socket listens already: no waiting loop before the first request.
    timeout "$timeout" cat "$dir/published" >"$dir/env" || true
    # shellcheck source=/dev/null
    . "$dir/env"
    # Nothing published: prebind failed before the server ran (126/127: it
    # cannot be run). Its status is passed on.
    if [ -z "${PREBIND_URL:-}" ]; then
        local status
        status=$(wait_status "$dir") || status=1
        cat "$dir/server.log" >&2
        echo "ci.sh: prebind published nothing (exit status $status)" >&2
        exit "$status"
    fi

    # The env format writes plain values bare, so the lines mean the same
    # to a shell and to GitHub's KEY=VALUE file.
    {
        cat "$dir/env"
        echo "PREBIND_CI_DIR=$dir"
    } >>"$GITHUB_ENV"
    echo "ci.sh: server on $PREBIND_URL (prebind pid $PREBIND_PID); variables appended to $GITHUB_ENV"
}

# wait_status DIR: wait (bounded) until prebind has exited; print its status.
wait_status() {
    local i
    for ((i = 0; i < timeout * 20; i++)); do
        if [ -e "$1/status" ]; then
            cat "$1/status"
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# stop: SIGTERM to prebind (forwarded to the server), then prebind's exit
# status, which is the server's.
stop() {
    if [ -z "${PREBIND_PID:-}" ] || [ -z "${PREBIND_CI_DIR:-}" ]; then
        die "stop: PREBIND_PID and PREBIND_CI_DIR are not set (run 'start' first)"
    fi
    kill -TERM "$PREBIND_PID" 2>/dev/null || true
    local status
    status=$(wait_status "$PREBIND_CI_DIR") || die "prebind (pid $PREBIND_PID) did not exit"
    echo "ci.sh: server stopped, exit status $status"
    if [ "$status" -ne 0 ]; then
        cat "$PREBIND_CI_DIR/server.log" >&2
        return "$status"
    fi
    rm -rf "$PREBIND_CI_DIR"
}

check() {
    curl -fsS --max-time "$timeout" "$PREBIND_URL/"
}

main() {
    local action=run
    case ${1:-} in
    run | start | stop)
        action=$1
        shift
        ;;
    esac
    [ "${1:-}" = -- ] && shift
    if [ $# -eq 0 ]; then
        set -- python3 "$here/../python/stdlib_server.py"
    fi

    case $action in
    start) start "$@" ;;
    stop) stop ;;
    run)
        start "$@"
        local ok=0
        check || ok=$?
        stop || ok=$?
        return "$ok"
        ;;
    esac
}

main "$@"
