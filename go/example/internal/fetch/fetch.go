// Package fetch is the samples' HTTP client: GET, bounded, or fail.
package fetch

import (
	"io"
	"net/http"
	"testing"
	"time"
)

var client = http.Client{Timeout: 20 * time.Second}

// Get returns the body of url, or fails the test.
func Get(t testing.TB, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %q %v", url, resp.StatusCode, body, err)
	}
	return string(body)
}
