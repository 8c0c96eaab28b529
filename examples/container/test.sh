#!/usr/bin/env bash
# Runs the Dockerfile's ENTRYPOINT + CMD as Docker would: prebind as PID 1
# of new PID, mount and network namespaces (unshare), then checks that a
# request is answered, and that SIGTERM -- from outside, as `docker stop`
# sends it, and from inside, as `docker exec CTR kill 1` -- stops it with the
# server's status, 0. Needs root (or unprivileged user namespaces),
# util-linux (unshare, nsenter), iproute2 and curl.
#
#   PREBIND=/path/to/prebind bash test.sh
#
# Ends with a line 'N passed, N failed'; exit status 0 only if all passed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prebind=${PREBIND:-$(command -v prebind || echo prebind)}
timeout=20 # seconds: the bound on every wait
work=$(mktemp -d)
upid=
cleanup() {
    [ -n "$upid" ] && kill -KILL "$upid" 2>/dev/null # --kill-child takes the rest
    rm -rf "$work"
}
trap cleanup EXIT
passed=0
failed=0

# The command line, from the Dockerfile itself, with the image's paths
# mapped to this checkout's.
mapfile -t argv < <(python3 - "$here/Dockerfile" <<'PY'
import json, sys
words = {}
for line in open(sys.argv[1]):
    key, _, rest = line.partition(" ")
    if key in ("ENTRYPOINT", "CMD"):
        words[key] = json.loads(rest)
for word in words["ENTRYPOINT"] + words["CMD"]:
    print(word)
PY
)
for i in "${!argv[@]}"; do
    case ${argv[$i]} in
    /usr/local/bin/prebind) argv[i]=$prebind ;;
    /app/server.py) argv[i]=$root/examples/python/stdlib_server.py ;;
    esac
done
echo "# entrypoint: ${argv[*]}"

userns=() nsenter_userns=()
if [ "$(id -u)" -ne 0 ]; then
    userns=(--user --map-root-user)
    nsenter_userns=(--user --preserve-credentials)
fi

# wait_until SECONDS COMMAND...: retry COMMAND every 50 ms, bounded.
wait_until() {
    local i n=$(($1 * 20))
    shift
    for ((i = 0; i < n; i++)); do
        "$@" && return 0
        sleep 0.05
    done
    return 1
}

# start_container: the entrypoint as PID 1; sets upid (unshare) and pid1
# (PID 1 of the namespace, as this namespace sees it).
start_container() {
    # sh brings the loopback up, then execs: prebind becomes PID 1.
    unshare "${userns[@]}" --net --pid --mount --fork --mount-proc --kill-child \
        sh -c 'ip link set lo up && exec "$@"' sh "${argv[@]}" \
        >"$work/out" 2>"$work/err" </dev/null &
    upid=$!
    pid1=
    # unshare's own error (a chroot whose / is no mount point refuses
    # --mount: "cannot change root filesystem propagation") is shown.
    wait_until "$timeout" find_pid1 || {
        echo "# no PID 1"
        sed 's/^/# /' "$work/err"
        return 1
    }
    # prebind logs the address on stderr once the socket listens.
    wait_until "$timeout" grep -q 'listening on' "$work/err" || { cat "$work/err"; return 1; }
}

# The child of unshare that runs prebind's executable, compared as a file
# (device and inode): the path /proc/PID/exe shows depends on the mount
# namespace, and differs from this one's in a chroot.
find_pid1() {
    pid1=$(cat "/proc/$upid/task/$upid/children" 2>/dev/null) || return 1
    pid1=${pid1%% *}
    [ -n "$pid1" ] && [ "$(stat -L -c %d:%i "/proc/$pid1/exe" 2>/dev/null)" = "$(stat -L -c %d:%i "$prebind")" ]
}

in_container() {
    nsenter "${nsenter_userns[@]}" --target "$pid1" "$@"
}

check_serving() {
    # PID 1 inside, another pid outside: a PID namespace of its own.
    grep -Eq '^NSpid:[[:space:]]+[0-9]+[[:space:]]+1$' "/proc/$pid1/status" || return 1
    local body
    body=$(in_container --net curl -fsS --max-time "$timeout" http://127.0.0.1:8080/hello) || return 1
    echo "# $body"
    [[ $body == "stdlib pid="*" path=/hello" ]]
}

gone() {
    ! kill -0 "$1" 2>/dev/null
}

# wait_exit: prebind's (PID 1's) exit status, which unshare passes on.
wait_exit() {
    wait_until "$timeout" gone "$upid" || return 1
    local status=0
    wait "$upid" || status=$?
    upid=
    echo "# exit status $status"
    sed 's/^/# /' "$work/err"
    [ "$status" -eq 0 ]
}

test_docker_stop() {
    start_container && check_serving || return 1
    kill -TERM "$pid1" # from the parent namespace, as docker stop does
    wait_exit
}

test_kill_1_from_inside() {
    # From inside, the kernel drops signals to PID 1 that it does not
    # handle; prebind takes them through a signalfd (blocked, not ignored).
    start_container && check_serving || return 1
    in_container --pid --mount kill -TERM 1 || return 1
    wait_exit
}

for t in test_docker_stop test_kill_1_from_inside; do
    if "$t"; then
        echo "ok - $t"
        passed=$((passed + 1))
    else
        echo "not ok - $t"
        failed=$((failed + 1))
    fi
    [ -z "$upid" ] || { kill -KILL "$upid" 2>/dev/null; upid=; }
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
