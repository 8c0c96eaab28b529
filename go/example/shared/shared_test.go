// One server for every package that asks for it by the same name, in any
// process of the run (prebindtest.Share): the first starts it, the last
// to let go stops it.
package shared

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"example.com/prebind-go-example/internal/fetch"
	"github.com/prebind/prebind/go/prebindtest"
)

var srv *prebindtest.Server

func TestMain(m *testing.M) {
	prebindtest.Main(m, func(t testing.TB) {
		// Named after the go command, this run's: the packages of one run
		// share it, and a run never meets the last one's lingering server.
		name := "prebind-go-example-" + strconv.Itoa(os.Getppid())
		srv = prebindtest.Start(t, []string{prebindtest.Build(t, "example.com/prebind-go-example/cmd/greeter")},
			prebindtest.Share(name), prebindtest.ReadyHTTP("/health"))
	})
}

func TestReady(t *testing.T) {
	t.Parallel()
	fetch.Get(t, srv.URL+"/health")
}

func TestHello(t *testing.T) {
	t.Parallel()
	if got := fetch.Get(t, srv.URL); got != fmt.Sprintf("hello from pid %d\n", srv.Pid) {
		t.Fatalf("got %q", got)
	}
}

func TestCountGoesUp(t *testing.T) {
	t.Parallel()
	a, b := fetch.Get(t, srv.URL+"/count"), fetch.Get(t, srv.URL+"/count")
	x, _ := strconv.Atoi(strings.TrimSpace(a))
	y, _ := strconv.Atoi(strings.TrimSpace(b))
	if y <= x {
		t.Fatalf("count %d then %d", x, y)
	}
}

func TestOneServer(t *testing.T) {
	t.Parallel()
	if a, b := fetch.Get(t, srv.URL), fetch.Get(t, srv.URL); a != b {
		t.Fatalf("two servers: %q, %q", a, b)
	}
}

func TestPorts(t *testing.T) {
	t.Parallel()
	if len(srv.Ports) != 1 || srv.Ports[0] != srv.Port {
		t.Fatalf("Ports %v, Port %d", srv.Ports, srv.Port)
	}
}
