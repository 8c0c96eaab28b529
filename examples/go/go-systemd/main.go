// Command prebind-example-go-systemd takes its sockets with go-systemd's
// activation package, which checks LISTEN_PID and reads LISTEN_FDNAMES.
//
//	go build -o server . && prebind --print=url -l web=0 -- ./server
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
)

func main() {
	log.SetPrefix("prebind-example-go-systemd: ")
	log.SetFlags(0)

	// unsetEnv=true: LISTEN_* do not reach processes we start. Named
	// sockets come from LISTEN_FDNAMES (prebind -l web=0).
	byName, err := activation.ListenersWithNames()
	if err != nil {
		log.Fatal(err)
	}
	listeners := byName["web"]
	if len(listeners) == 0 {
		// No LISTEN_FDS, or LISTEN_PID is not ours (a wrapper such as
		// sh -c without exec sits in between): go-systemd sees nothing.
		log.Fatal("no socket named 'web' passed: run me as 'prebind -l web=0 -- server'")
	}

	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "go-systemd pid=%d path=%s\n", os.Getpid(), r.URL.Path)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(listeners[0]) }()
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
