// Command prebind-example-go is an HTTP server that never binds: it takes its
// listening socket from prebind (or systemd) as fd 3, with the standard
// library only.
//
//	go build -o server . && prebind --print=url -- ./server
//
// SIGTERM (forwarded by prebind) shuts it down gracefully, with status 0.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// listenFdsStart is SD_LISTEN_FDS_START: the first passed socket.
const listenFdsStart = 3

// activationListener returns the first socket passed by socket activation,
// reading the protocol as sd_listen_fds(3) does. go-systemd's
// activation.Listeners() does the same (Debian: golang-github-coreos-go-systemd-dev).
func activationListener() (net.Listener, error) {
	pid := os.Getenv("LISTEN_PID")
	if pid != strconv.Itoa(os.Getpid()) {
		// A wrapper (sh -c, go run, npm run) sits between prebind and us:
		// the sockets were meant for another process.
		return nil, fmt.Errorf("LISTEN_PID=%q is not my pid %d: run me directly or with exec", pid, os.Getpid())
	}
	n, err := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	if err != nil || n < 1 {
		return nil, errors.New("no sockets passed (LISTEN_FDS)")
	}
	name := strings.Split(os.Getenv("LISTEN_FDNAMES"), ":")[0]
	// The variables are ours alone: processes we start must not take them.
	for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(v)
	}
	f := os.NewFile(listenFdsStart, name)
	defer f.Close()
	// FileListener dups the fd, close-on-exec; the deferred Close drops fd 3.
	return net.FileListener(f)
}

func main() {
	log.SetPrefix("prebind-example-go: ")
	log.SetFlags(0)

	ln, err := activationListener()
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "go pid=%d path=%s\n", os.Getpid(), r.URL.Path)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()

	select {
	case err := <-done:
		log.Fatal(err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		log.Fatal(err)
	}
}
