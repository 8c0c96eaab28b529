// One server for the package: started in TestMain, shared by every test.
package hello

import (
	"fmt"
	"testing"

	"example.com/prebind-go-example/internal/fetch"
	"github.com/prebind/prebind/go/prebindtest"
)

var srv *prebindtest.Server

func TestMain(m *testing.M) {
	prebindtest.Main(m, func(t testing.TB) {
		srv = prebindtest.Start(t, []string{prebindtest.Build(t, "example.com/prebind-go-example/cmd/greeter")})
	})
}

func TestHello(t *testing.T) {
	t.Parallel()
	if got, want := fetch.Get(t, srv.URL), fmt.Sprintf("hello from pid %d\n", srv.Pid); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	if got := fetch.Get(t, srv.URL+"/health"); got != "ok\n" {
		t.Fatalf("got %q", got)
	}
}

func TestPath(t *testing.T) {
	t.Parallel()
	fetch.Get(t, srv.URL+"/any/path")
}

func TestCount(t *testing.T) {
	t.Parallel()
	fetch.Get(t, srv.URL+"/count")
}

func TestPortInURL(t *testing.T) {
	t.Parallel()
	if srv.URL != fmt.Sprintf("http://%s:%d", srv.Host, srv.Port) {
		t.Fatalf("URL %s, Host %s, Port %d", srv.URL, srv.Host, srv.Port)
	}
}
