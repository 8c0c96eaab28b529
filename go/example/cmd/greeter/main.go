// Command greeter is the sample server: it takes its socket from prebind
// (prebind.Listener), or with -bind binds -addr itself, as a server that
// knows nothing of prebind does (prebindtest.Intercept).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prebind/prebind/go/prebind"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "where to listen without prebind")
	bind := flag.Bool("bind", false, "bind -addr even under prebind")
	flag.Parse()
	log.SetFlags(0)

	var ln net.Listener
	var err error
	if *bind {
		ln, err = net.Listen("tcp", *addr)
	} else {
		ln, err = prebind.Listener(*addr)
	}
	if err != nil {
		log.Fatal(err)
	}
	var count atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from pid %d\n", os.Getpid())
	})
	mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d\n", count.Add(1))
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("greeter: serving on %s", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
