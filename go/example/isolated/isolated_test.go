// A server per test: one line each, stopped when the test ends.
package isolated

import (
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

// counts checks that the test has a fresh server of its own: its counter
// starts at 1, whatever the other tests in parallel do.
func counts(t *testing.T, n int) {
	t.Parallel()
	srv := prebindtest.Start(t, []string{greeter})
	for i := 1; i <= n; i++ {
		if got, want := fetch.Get(t, srv.URL+"/count"), string(rune('0'+i))+"\n"; got != want {
			t.Fatalf("count %q, want %q", got, want)
		}
	}
}

func TestOne(t *testing.T)   { counts(t, 1) }
func TestTwo(t *testing.T)   { counts(t, 2) }
func TestThree(t *testing.T) { counts(t, 3) }
func TestFour(t *testing.T)  { counts(t, 4) }
func TestFive(t *testing.T)  { counts(t, 5) }
