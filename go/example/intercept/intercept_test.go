// Servers that bind their own port (8080, every one of them, in
// parallel): prebindtest.Intercept hands each its own free port.
package intercept

import (
	"fmt"
	"testing"

	"example.com/prebind-go-example/internal/fetch"
	"github.com/prebind/prebind/go/prebindtest"
)

var greeter string

func TestMain(m *testing.M) {
	prebindtest.Main(m, func(t testing.TB) {
		greeter = prebindtest.Build(t, "example.com/prebind-go-example/cmd/greeter")
	})
}

func own(t *testing.T) {
	t.Parallel()
	srv := prebindtest.Start(t, []string{greeter, "-bind", "-addr", "127.0.0.1:8080"}, prebindtest.Intercept(8080))
	if srv.Port == 8080 {
		t.Fatal("port 8080 itself: the bind was not intercepted")
	}
	if got, want := fetch.Get(t, srv.URL), fmt.Sprintf("hello from pid %d\n", srv.Pid); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestFirst(t *testing.T)  { own(t) }
func TestSecond(t *testing.T) { own(t) }
func TestThird(t *testing.T)  { own(t) }
func TestFourth(t *testing.T) { own(t) }
func TestFifth(t *testing.T)  { own(t) }
