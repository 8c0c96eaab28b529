package prebind_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prebind/prebind/go/prebind"
	"github.com/prebind/prebind/go/prebindtest"
)

// Run with LISTENER_TEST_SERVE set, the test binary is a server: it says
// its pid, and whether the variables are gone and fd 3 closed.
func TestMain(m *testing.M) {
	if os.Getenv("LISTENER_TEST_SERVE") != "" {
		ln, err := prebind.Listener("127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		_, fd3 := os.Stat("/proc/self/fd/3")
		env := os.Getenv("LISTEN_PID") + os.Getenv("LISTEN_FDS") + os.Getenv("LISTEN_FDNAMES")
		http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "pid=%d env=%q fd3closed=%v", os.Getpid(), env, os.IsNotExist(fd3))
		}))
		return
	}
	os.Exit(m.Run())
}

func TestListenerTakesTheSocketUnderPrebind(t *testing.T) {
	srv := prebindtest.Start(t, []string{os.Args[0]}, prebindtest.Env("LISTENER_TEST_SERVE=1"),
		prebindtest.Listen("web=0"))
	client := http.Client{Timeout: 20 * time.Second}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if want := fmt.Sprintf(`pid=%d env="" fd3closed=true`, srv.Pid); string(body) != want {
		t.Fatalf("got %q, want %q", body, want)
	}
}

func TestListenerListensAlone(t *testing.T) {
	for _, v := range []string{"LISTEN_PID", "LISTEN_FDS"} {
		t.Setenv(v, "")
	}
	ln, err := prebind.Listener("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !strings.HasPrefix(ln.Addr().String(), "127.0.0.1:") || strings.HasSuffix(ln.Addr().String(), ":0") {
		t.Fatalf("listening on %s", ln.Addr())
	}
}

// Variables meant for another process (LISTEN_PID not ours, as under a
// wrapper) are not taken, and are unset as sd_listen_fds(3) does.
func TestListenerLeavesAnotherProcesssSockets(t *testing.T) {
	t.Setenv("LISTEN_PID", fmt.Sprint(os.Getppid()))
	t.Setenv("LISTEN_FDS", "1")
	t.Setenv("LISTEN_FDNAMES", "web")
	ln, err := prebind.Listener("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ln.Addr().Network() != "tcp" || os.Getenv("LISTEN_PID")+os.Getenv("LISTEN_FDS")+os.Getenv("LISTEN_FDNAMES") != "" {
		t.Fatalf("listening on %s, LISTEN_* left: %q %q", ln.Addr(), os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"))
	}
}
