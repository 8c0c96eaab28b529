// Package prebind is the server's side of prebind: the socket it was
// passed, or its own where it runs alone.
//
//	ln, err := prebind.Listener(":8080")
//	http.Serve(ln, handler)
//
// Under prebind (or systemd's socket activation) the listener is the
// socket at fd 3, already listening; elsewhere it is net.Listen("tcp",
// addr). The same binary runs in a test, by hand and as a systemd unit.
package prebind

import (
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// listenFdsStart is SD_LISTEN_FDS_START: the first passed socket.
const listenFdsStart = 3

// Listener returns the first socket passed by the systemd protocol when
// LISTEN_PID is this process's pid and LISTEN_FDS is 1 or more, else
// net.Listen("tcp", addr). As sd_listen_fds(3) does, it unsets
// LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES (processes the server starts
// must not take the sockets for theirs) and marks the passed fds
// close-on-exec; so only the first call takes the socket.
func Listener(addr string) (net.Listener, error) {
	f := passed()
	if f == nil {
		return net.Listen("tcp", addr)
	}
	defer f.Close() // FileListener has its own (close-on-exec) copy
	return net.FileListener(f)
}

// passed is the first passed socket, or nil.
func passed() *os.File {
	pid, fds := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS")
	name := strings.SplitN(os.Getenv("LISTEN_FDNAMES"), ":", 2)[0]
	for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(v)
	}
	// Variables meant for another process (a wrapper such as sh -c, or go
	// run, sits between prebind and us) describe fds that are not ours.
	if p, err := number(pid); err != nil || p != int64(os.Getpid()) {
		return nil
	}
	n, err := number(fds)
	if err != nil || n < 1 {
		return nil
	}
	for fd := listenFdsStart; fd < listenFdsStart+int(n); fd++ {
		syscall.CloseOnExec(fd)
	}
	if name == "" {
		name = "unknown"
	}
	return os.NewFile(listenFdsStart, name)
}

// number reads LISTEN_PID and LISTEN_FDS as libsystemd does (strtol with
// base 0: 010 is 8, 0x0a is 10; blanks and a sign allowed).
func number(s string) (int64, error) {
	return strconv.ParseInt(strings.TrimSpace(s), 0, 32)
}
