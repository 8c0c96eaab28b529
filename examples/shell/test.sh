#!/usr/bin/env bash
# Tests for ci.sh: the whole run, start and stop in separate shells (as in
# separate CI steps), $GITHUB_ENV unset, and a server that cannot start.
#
#   PREBIND=/path/to/prebind bash test.sh
#
# Ends with a line 'N passed, N failed'; exit status 0 only if all passed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# ci.sh makes its state directories here, so nothing is left behind.
export TMPDIR=$work
unset GITHUB_ENV RUNNER_TEMP PREBIND_PID PREBIND_CI_DIR PREBIND_URL
passed=0
failed=0

ok() {
    echo "ok - $1"
    passed=$((passed + 1))
}
not_ok() {
    echo "not ok - $1"
    failed=$((failed + 1))
}

# ci_sh ARGS...: run ci.sh, bounded, output in $work/out.
ci_sh() {
    timeout 60 bash "$here/ci.sh" "$@" >"$work/out" 2>&1
}

alive() {
    kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

test_run() {
    export GITHUB_ENV=$work/github_env_run
    : >"$GITHUB_ENV"
    if ! ci_sh run; then
        cat "$work/out"
        return 1
    fi
    grep -q '^stdlib pid=[0-9]* path=/$' "$work/out" || return 1
    grep -Eq '^PREBIND_URL=http://127\.0\.0\.1:[0-9]+$' "$GITHUB_ENV" || return 1
    grep -Eq '^PREBIND_WEB_PORT=[0-9]+$' "$GITHUB_ENV" || return 1
    local pid dir
    pid=$(sed -n 's/^PREBIND_PID=//p' "$GITHUB_ENV")
    dir=$(sed -n 's/^PREBIND_CI_DIR=//p' "$GITHUB_ENV")
    ! alive "$pid" && [ ! -e "$dir" ]
}

test_steps() {
    # Step 1 starts the server and returns; step 2 reads $GITHUB_ENV as the
    # runner would (KEY=VALUE lines) and talks to it; step 3 stops it.
    export GITHUB_ENV=$work/github_env_steps
    : >"$GITHUB_ENV"
    ci_sh start || {
        cat "$work/out"
        return 1
    }
    (
        set -a
        # shellcheck source=/dev/null
        . "$GITHUB_ENV"
        set +a
        alive "$PREBIND_CHILD_PID" || exit 1
        curl -fsS --max-time 20 "$PREBIND_URL/step2" | grep -q '^stdlib pid=.* path=/step2$' || exit 1
        timeout 60 bash "$here/ci.sh" stop
    )
}

test_stop_right_after_start() {
    # A SIGTERM that beats the server's own handler still counts as stopped.
    export GITHUB_ENV=$work/github_env_quick
    : >"$GITHUB_ENV"
    ci_sh start || return 1
    (
        set -a
        # shellcheck source=/dev/null
        . "$GITHUB_ENV"
        timeout 60 bash "$here/ci.sh" stop
    )
}

test_github_env_unset() {
    unset GITHUB_ENV
    ci_sh run || return 1
    local file
    file=$(sed -n 's/.*variables appended to //p' "$work/out")
    [ -n "$file" ] && grep -q '^PREBIND_URL=http://' "$file"
}

test_server_not_found() {
    export GITHUB_ENV=$work/github_env_fail
    local status=0
    ci_sh run -- "$work/no-such-server" || status=$?
    # prebind's 127 (not found) is passed on; the wait was bounded.
    [ "$status" -eq 127 ] && grep -q "cannot run" "$work/out"
}

test_server_fails() {
    export GITHUB_ENV=$work/github_env_fail2
    local status=0
    ci_sh run -- sh -c 'exit 3' || status=$?
    [ "$status" -eq 3 ]
}

for t in test_run test_steps test_stop_right_after_start test_github_env_unset test_server_not_found test_server_fails; do
    if ("$t"); then ok "$t"; else not_ok "$t"; fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
