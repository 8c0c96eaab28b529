// A static Go server for the --netns tests: it binds its own port
// (":8080", or -addr) the way Go programs do, with raw system calls that
// no LD_PRELOAD interposer sees. Each connection starts with one command
// line:
//
//	id            "id=<ID> pid=<pid> uid=<uid>", then close
//	echo          copy everything back; at EOF, half-close and finish
//	sum           read to EOF, then answer "<bytes> <sha256>" (half-close test)
//	bulk N SEED   send N bytes of a stream seeded with SEED while reading
//	              to EOF, then answer "<bytes read> <sha256 read> <sha256 sent>"
//	greet         "hello", half-close, then read to EOF (noted as "greet-read N")
//	die N         read N bytes, then exit the whole process (status 3)
//	reset         close with a reset (SO_LINGER 0)
//	notes         the read errors (and greet counts) seen so far, "|"-separated
//	exit          exit the process with status 0
//	dial ADDR     connect to ADDR and relay its first line (a server that
//	              reaches another one inside the namespace)
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	mu    sync.Mutex
	notes []string
)

func note(err error) {
	mu.Lock()
	notes = append(notes, err.Error())
	mu.Unlock()
}

// A reproducible stream of bytes: the client computes the same.
type stream struct{ r *rand.Rand }

func (s stream) Read(p []byte) (int, error) { return s.r.Read(p) }

func handle(c *net.TCPConn) {
	defer c.Close()
	in := bufio.NewReaderSize(c, 65536)
	line, err := in.ReadString('\n')
	if err != nil {
		note(err)
		return
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return
	}
	switch f[0] {
	case "id":
		fmt.Fprintf(c, "id=%s pid=%d uid=%d\n", os.Getenv("ID"), os.Getpid(), os.Getuid())
	case "echo":
		if _, err := io.Copy(c, in); err != nil {
			note(err)
		}
		c.CloseWrite()
		io.Copy(io.Discard, in)
	case "sum":
		h := sha256.New()
		n, err := io.Copy(h, in)
		if err != nil {
			note(err)
			return
		}
		fmt.Fprintf(c, "%d %s\n", n, hex.EncodeToString(h.Sum(nil)))
	case "bulk":
		size, _ := strconv.ParseInt(f[1], 10, 64)
		seed, _ := strconv.ParseInt(f[2], 10, 64)
		done := make(chan error, 1)
		sent := sha256.New()
		go func() {
			src := io.TeeReader(stream{rand.New(rand.NewSource(seed))}, sent)
			_, err := io.CopyN(c, src, size)
			done <- err
		}()
		h := sha256.New()
		n, err := io.Copy(h, in)
		if err != nil {
			note(err)
			return
		}
		if err := <-done; err != nil {
			note(err)
			return
		}
		fmt.Fprintf(c, "%d %s %s\n", n, hex.EncodeToString(h.Sum(nil)), hex.EncodeToString(sent.Sum(nil)))
	case "greet":
		fmt.Fprintf(c, "hello\n")
		c.CloseWrite()
		n, err := io.Copy(io.Discard, in)
		if err != nil {
			note(err)
			return
		}
		mu.Lock()
		notes = append(notes, fmt.Sprintf("greet-read %d", n))
		mu.Unlock()
	case "die":
		size, _ := strconv.ParseInt(f[1], 10, 64)
		io.CopyN(io.Discard, in, size)
		os.Exit(3)
	case "reset":
		c.SetLinger(0)
	case "notes":
		mu.Lock()
		fmt.Fprintf(c, "%s\n", strings.Join(notes, "|"))
		mu.Unlock()
	case "exit":
		os.Exit(0)
	case "dial":
		d, err := net.DialTimeout("tcp", f[1], 5*time.Second)
		if err != nil {
			fmt.Fprintf(c, "dial error: %v\n", err)
			return
		}
		defer d.Close()
		fmt.Fprintf(d, "id\n")
		answer, _ := bufio.NewReader(d).ReadString('\n')
		fmt.Fprintf(c, "via %s", answer)
	}
}

func main() {
	addr := flag.String("addr", ":8080", "where to listen")
	delay := flag.Duration("delay", 0, "wait this long before listening")
	flag.Parse()
	time.Sleep(*delay)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			continue
		}
		go handle(c.(*net.TCPConn))
	}
}
